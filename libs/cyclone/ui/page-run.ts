import { api, ApiError } from './api.js';
import type { Attempt, RunAnswer, Step } from './api-types.js';
import { drawCalls } from './calls.js';
import { drawDag } from './dag.js';
import { h, show, type Child } from './dom.js';
import { between, duration, jsonBlock, outcomeBadge, progressView, scheduledBadge, shownState, stateBadge, time, timeCell } from './format.js';
import { actionButton, emptyState, link, poll, problem, type PageContext, type PageStop } from './page.js';

/** Step states nothing moves out of (unless a retry reopens them), and the outcomes of attempts that end in them. */
const TERMINAL_STEP = new Set(['completed', 'discarded', 'cancelled']);
/** A finished run changes only when someone retries it: its page refreshes less often. */
const FINISHED_RUN = new Set(['completed', 'failed', 'cancelled']);

/**
 * One run: its graph with each node's state, the selected node's attempts,
 * error, output and progress, the run's input, a timeline, and the actions
 * that apply to it in its state.
 */
export function runPage(root: HTMLElement, ctx: PageContext, runId: string): PageStop {
  const head = h('div', { class: 'run-head' });
  const body = h('div', { class: 'page-body' });
  show(root, h('p', { class: 'crumbs' }, link('/runs', '← Runs')), head, body);
  let selected: string | null = null;
  let last: RunAnswer | null = null;

  const { stop, refresh } = poll(async () => {
    try {
      last = await api.run(runId);
      render(last);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) {
        show(head, h('h1', null, 'Run not found'));
        show(body, emptyState('There is no such run.', 'Its id may be wrong, or its retention has ended and it was deleted.'));
      } else {
        show(body, problem(error));
      }
    }
  }, () => (last !== null && FINISHED_RUN.has(last.run.state) ? 15_000 : 2_000));

  function render(answer: RunAnswer): void {
    const { run, steps } = answer;
    const code = run.version !== null;
    if (selected === null || !steps.some((s) => s.nodeId === selected)) selected = defaultNode(steps);
    const discarded = steps.filter((s) => s.state === 'discarded');
    show(
      head,
      h(
        'h1',
        null,
        h('span', { class: 'run-title' }, run.name),
        run.type === 'workflow' ? h('span', { class: 'tag' }, code ? `workflow · code v${run.version}` : 'workflow') : null,
        ' ',
        run.dueAt !== null ? scheduledBadge(run.dueAt) : stateBadge(run.state),
      ),
      h(
        'dl',
        { class: 'facts' },
        fact('Run', h('code', { class: 'run-id' }, run.id)),
        fact('Queue', h('span', { class: 'run-queue' }, run.queue)),
        fact('Unique key', run.uniqueKey === null ? h('span', { class: 'muted' }, '—') : h('span', { class: 'run-unique-key' }, run.uniqueKey)),
        fact('Created', timeCell(run.createdAt)),
        fact('Finished', timeCell(run.finishedAt)),
        fact('Took', run.finishedAt ? between(run.createdAt, run.finishedAt) : `${between(run.createdAt, new Date().toISOString())} so far`),
        run.parentId !== null ? fact('Parent', link(`/runs/${run.parentId}`, run.parentId, undefined, { class: 'run-parent' })) : null,
      ),
      code ? versionNotice(run) : null,
      h(
        'div',
        { class: 'toolbar' },
        run.state === 'running'
          ? actionButton(ctx, 'Pause', () => api.pause(run.id), { done: 'Run paused: nothing of it is claimed until it is resumed.', after: refresh })
          : null,
        run.state === 'paused' ? actionButton(ctx, 'Resume', () => api.resume(run.id), { done: 'Run resumed.', after: refresh }) : null,
        discarded.length > 0
          ? actionButton(ctx, discarded.length > 1 ? `Retry all ${discarded.length} failed nodes` : 'Retry failed node', () => api.retryAll(run.id), {
              name: 'retry-all',
              done: 'Retried: the failed nodes run again.',
              after: refresh,
            })
          : null,
        run.state === 'running' || run.state === 'paused'
          ? actionButton(ctx, 'Cancel run', () => api.cancel(run.id), {
              name: 'cancel',
              danger: true,
              confirm: 'Cancel this run? Its unfinished nodes are cancelled and a running handler is told to stop.',
              done: 'Run cancelled.',
              after: refresh,
            })
          : null,
      ),
    );
    const step = steps.find((s) => s.nodeId === selected) ?? null;
    show(
      body,
      h(
        'section',
        { class: 'card graph', 'aria-label': 'Graph' },
        h('h2', null, code ? 'Calls' : run.type === 'workflow' ? 'Graph' : 'Job'),
        code
          ? drawCalls(steps, selected, select)
          : h('div', { class: 'dag-scroll' }, drawDag(steps, selected, select)),
        legend(),
      ),
      h(
        'div',
        { class: 'columns' },
        step ? nodeCard(step, run.id, answer.at, code && run.state === 'failed') : null,
        h('section', { class: 'card', 'aria-label': 'Input' }, h('h2', null, 'Input'), jsonBlock(run.input, 'run input')),
      ),
      h('section', { class: 'card', 'aria-label': 'Nodes' }, h('h2', null, 'Nodes'), nodesTable(steps)),
      h('section', { class: 'card', 'aria-label': 'Timeline' }, h('h2', null, 'Timeline'), timeline(answer)),
    );
  }

  function select(nodeId: string): void {
    selected = nodeId;
    if (last) render(last);
  }

  /** `retryable`: a failed code workflow, whose failed nodes of any type run again with it. */
  function nodeCard(step: Step, runId: string, at: string, retryable: boolean): HTMLElement {
    const progress = progressView(step.progress);
    // Due later: a delayed enqueue, a retry's backoff or a snooze, which Run now makes due at once.
    const waiting = step.type === 'step' && step.state === 'available' && step.scheduledAt > at;
    const attempts = step.type === 'step' || step.type === 'workflow' || step.type === 'run';
    return h(
      'section',
      { class: 'card node-card', 'aria-label': 'Node', 'data-node-id': step.nodeId },
      h('h2', null, 'Node ', h('code', { class: 'node-name' }, step.nodeId), ' ', stateBadge(shownState(step))),
      h(
        'dl',
        { class: 'facts' },
        fact('Type', step.type),
        step.kind !== null ? fact('Kind', h('span', { class: 'node-kind' }, step.kind)) : null,
        fact('Queue', step.queue),
        shownState(step) === 'scheduled' ? fact('Due', timeCell(step.scheduledAt)) : null,
        attempts ? fact('Attempt', `${step.attempt} of ${step.maxAttempts}`) : null,
        step.reclaims > 0 ? fact('Reclaims', `${step.reclaims}${step.maxReclaims !== null ? ` of ${step.maxReclaims}` : ''} (a worker crashed or lost its lease)`) : null,
        step.after.length > 0 && step.type !== 'workflow' ? fact('After', step.after.join(', ')) : null,
        step.type === 'workflow' && step.state === 'pending' ? fact('Waiting on', waitingOn(step.after)) : null,
        step.type === 'child' && typeof step.output === 'string' ? fact('Child run', link(`/runs/${step.output}`, step.output, undefined, { class: 'child-run' })) : null,
        step.timeoutMs !== null ? fact('Timeout', duration(step.timeoutMs)) : null,
        step.leaseOwner !== null ? fact('Worker', step.leaseOwner) : null,
        waiting ? fact('Due', h('span', { class: 'node-due' }, timeCell(step.scheduledAt), ` (in ${between(at, step.scheduledAt)})`)) : null,
        step.startedAt !== null && step.finishedAt !== null ? fact('Ran for', between(step.startedAt, step.finishedAt)) : null,
      ),
      step.state === 'discarded' && (step.type === 'step' || retryable)
        ? h('div', { class: 'toolbar' }, actionButton(ctx, 'Retry this node', () => api.retry(runId, step.nodeId), {
            name: 'retry-node',
            done: `Node ${step.nodeId} retried.`,
            after: refresh,
          }))
        : null,
      waiting
        ? h('div', { class: 'toolbar' }, actionButton(ctx, 'Run now', () => api.runNow(runId, step.nodeId), {
            name: 'run-now',
            done: `Node ${step.nodeId} is due now; no attempt is used up.`,
            after: refresh,
          }))
        : null,
      step.error !== null
        ? h('div', { class: 'error-box' }, h('h3', null, `Error (${step.errorKind ?? 'error'})`), h('pre', { class: 'node-error' }, step.error))
        : null,
      progress ? h('div', null, h('h3', null, 'Progress'), progress) : null,
      step.input !== null && step.input !== undefined ? h('div', null, h('h3', null, 'Input'), jsonBlock(step.input, 'node input')) : null,
      step.attempts.length > 0 ? attemptsView(step.attempts) : null,
      step.state === 'completed' || step.output !== null ? h('div', null, h('h3', null, 'Output'), jsonBlock(step.output, 'node output')) : null,
    );
  }

  return stop;
}

/**
 * Every attempt of a node, oldest first: its outcome, worker and times, the
 * error it ended with and, behind a click, the stack of what its handler threw.
 */
function attemptsView(attempts: Attempt[]): HTMLElement {
  return h(
    'div',
    { class: 'attempts' },
    h('h3', null, `Attempts (${attempts.length === 20 ? 'the last 20' : attempts.length})`),
    h(
      'ol',
      { class: 'attempt-list' },
      attempts.map((attempt) =>
        h(
          'li',
          { class: 'attempt', 'data-attempt': attempt.attempt, 'data-outcome': attempt.outcome ?? 'running' },
          h(
            'div',
            { class: 'attempt-head' },
            h('strong', null, `Attempt ${attempt.attempt}`),
            outcomeBadge(attempt.outcome),
            timeCell(attempt.startedAt),
            h('span', { class: 'muted' }, attempt.finishedAt === null ? 'running' : `took ${between(attempt.startedAt, attempt.finishedAt)}`),
            h('span', { class: 'attempt-worker muted', title: 'The client that ran it' }, attempt.worker ?? ''),
          ),
          attempt.error !== undefined ? h('pre', { class: 'attempt-error' }, `${attempt.errorKind ?? 'error'}: ${attempt.error}`) : null,
          attempt.stack !== undefined
            ? h('details', { class: 'attempt-stack' }, h('summary', null, 'Stack trace'), h('pre', { class: 'stack' }, attempt.stack))
            : null,
        ),
      ),
    ),
  );
}

/** The node to show first: a failed one, else a running one, else the last that moved. */
function defaultNode(steps: Step[]): string | null {
  const pick =
    steps.find((s) => s.state === 'discarded') ??
    steps.find((s) => s.state === 'running') ??
    [...steps].reverse().find((s) => s.state !== 'pending') ??
    steps[0];
  return pick?.nodeId ?? null;
}

/** The nodes a waiting workflow waits on: the first few, and how many more. */
function waitingOn(nodes: string[]): string {
  const shown = nodes.slice(0, 5).join(', ');
  return nodes.length > 5 ? `${shown} and ${nodes.length - 5} more` : shown;
}

/**
 * A code workflow's run started by a version this app does not run (or
 * newer than the one it runs) waits for a client that runs that version.
 */
function versionNotice(run: RunAnswer['run']): HTMLElement | null {
  if (run.version === null || (run.versionHere !== null && run.versionHere >= run.version)) return null;
  if (run.state !== 'running' && run.state !== 'paused') return null;
  const here = run.versionHere === null ? 'this app does not run this workflow' : `this app runs version ${run.versionHere}`;
  return h(
    'p',
    { class: 'notice version-notice' },
    `Started by version ${run.version} of this workflow; ${here}. A client that runs version ${run.version} or later takes its passes.`,
  );
}

function fact(term: string, value: Child): HTMLElement[] {
  return [h('dt', null, term), h('dd', null, value)];
}

function legend(): HTMLElement {
  const states = ['pending', 'scheduled', 'available', 'running', 'waiting_signal', 'waiting_timer', 'paused', 'completed', 'discarded', 'cancelled'];
  return h('p', { class: 'legend' }, states.map((state) => h('span', { class: `key state-${state}` }, state.replace('_', ' '))));
}

function nodesTable(steps: Step[]): HTMLElement {
  return h(
    'table',
    { class: 'grid nodes' },
    h(
      'thead',
      null,
      h('tr', null, h('th', null, 'Node'), h('th', null, 'Kind'), h('th', null, 'State'), h('th', { class: 'num' }, 'Attempt'), h('th', null, 'Started'), h('th', null, 'Finished'), h('th', null, 'Error')),
    ),
    h(
      'tbody',
      null,
      steps.map((step) =>
        h(
          'tr',
          { 'data-node-id': step.nodeId },
          h('td', null, h('code', null, step.nodeId)),
          h('td', null, step.kind ?? h('span', { class: 'muted' }, step.type)),
          h('td', null, stateBadge(shownState(step))),
          h('td', { class: 'num' }, step.type === 'step' ? `${step.attempt}/${step.maxAttempts}` : '—'),
          h('td', null, timeCell(step.startedAt)),
          h('td', null, timeCell(step.finishedAt)),
          h('td', { class: 'clip' }, step.error ?? ''),
        ),
      ),
    ),
  );
}

interface TimelineEvent {
  at: string;
  what: Child;
}

/** What happened to the run, in order, from the times its rows keep. */
function timeline({ run, steps }: RunAnswer): HTMLElement {
  const events: TimelineEvent[] = [{ at: run.createdAt, what: 'Run created' }];
  if (run.version !== null) events.push(...passEvents(steps));
  for (const step of steps) {
    // An element is in one place only: each event gets its own.
    const node = () => h('code', null, step.nodeId);
    if (step.scheduledAt !== run.createdAt && step.state !== 'pending') events.push({ at: step.scheduledAt, what: [node(), ' due'] });
    for (const attempt of step.attempts) {
      events.push({ at: attempt.startedAt, what: [node(), ` started (attempt ${attempt.attempt})`] });
      // An attempt that finished the node shows as the node's own finish below.
      if (attempt.finishedAt !== null && attempt.outcome !== null && !TERMINAL_STEP.has(attempt.outcome)) {
        events.push({ at: attempt.finishedAt, what: [node(), ' attempt ', outcomeBadge(attempt.outcome)] });
      }
    }
    if (step.heartbeatAt !== null && step.state === 'running') events.push({ at: step.heartbeatAt, what: [node(), ' last heartbeat'] });
    if (step.wakeAt !== null && !TERMINAL_STEP.has(step.state)) events.push({ at: step.wakeAt, what: [node(), ' timer due'] });
    if (step.finishedAt !== null) events.push({ at: step.finishedAt, what: [node(), ' ', stateBadge(step.state)] });
  }
  if (run.finishedAt !== null) events.push({ at: run.finishedAt, what: ['Run ', stateBadge(run.state)] });
  events.sort((a, b) => a.at.localeCompare(b.at));
  return h(
    'ol',
    { class: 'timeline' },
    events.map((event) => h('li', null, h('time', { datetime: event.at, title: event.at }, time(event.at)), h('span', null, event.what))),
  );
}

/**
 * A code workflow's passes, as its nodes tell them: each batch of calls one
 * pass wrote (the nodes written by one statement share their time).
 */
function passEvents(steps: Step[]): TimelineEvent[] {
  const written = new Map<string, Step[]>();
  for (const step of steps) {
    if (step.type === 'workflow') continue;
    written.set(step.createdAt, [...(written.get(step.createdAt) ?? []), step]);
  }
  return [...written].map(([at, nodes]) => ({
    at,
    what:
      nodes.length === 1
        ? ['Workflow recorded ', h('code', null, nodes[0].nodeId)]
        : [`Workflow recorded ${nodes.length} calls: `, h('code', null, nodes[0].nodeId), ' … ', h('code', null, nodes[nodes.length - 1].nodeId)],
  }));
}
