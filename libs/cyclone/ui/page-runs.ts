import { api } from './api.js';
import type { BulkAction, BulkPreview, BulkResult, RunsAnswer, RunSummary } from './api-types.js';
import { h, show } from './dom.js';
import { count, scheduledBadge, shortId, stateBadge, timeCell } from './format.js';
import { actionButton, describeError, emptyState, link, poll, problem, type PageContext, type PageStop } from './page.js';

const STATES = ['running', 'paused', 'completed', 'failed', 'cancelled'];
/** The filters of the form, as named in the API and in the page's address. */
const FILTERS = ['state', 'kind', 'queue', 'from', 'to', 'q'] as const;

/**
 * The runs, newest first, filtered by state, kind, queue, creation time, or
 * found by run id or unique key; paged by key (older / newer), never by offset.
 */
export function runsPage(root: HTMLElement, ctx: PageContext): PageStop {
  const params = ctx.params;
  const body = h('div', { class: 'page-body' });
  show(root, h('h1', null, 'Runs'), filterForm(params, ctx), bulkActions(params, ctx, () => refresh()), body);
  // Only the first page follows new runs: a later page stays where the reader is.
  const first = !params.has('before') && !params.has('after');
  const { stop, refresh } = poll(
    async () => {
      try {
        render(await api.runs(params));
      } catch (error) {
        show(body, problem(error));
      }
    },
    first ? 5_000 : 60_000,
  );

  function render(answer: RunsAnswer): void {
    if (answer.runs.length === 0) {
      const filtered = FILTERS.some((name) => params.has(name));
      show(body, emptyState(filtered ? 'No run matches these filters.' : 'No runs yet.'), pager(answer));
      return;
    }
    show(
      body,
      h(
        'table',
        { class: 'grid runs' },
        h(
          'thead',
          null,
          h(
            'tr',
            null,
            h('th', null, 'Run'),
            h('th', null, 'Name'),
            h('th', null, 'Queue'),
            h('th', null, 'State'),
            h('th', null, 'Unique key'),
            h('th', null, 'Created'),
            h('th', null, 'Finished'),
          ),
        ),
        h('tbody', null, answer.runs.map(row)),
      ),
      pager(answer),
    );
  }

  function pager(answer: RunsAnswer): HTMLElement {
    const page = (cursor: 'before' | 'after', id: string) => {
      const next = new URLSearchParams(params);
      next.delete('before');
      next.delete('after');
      next.set(cursor, id);
      return next;
    };
    return h(
      'nav',
      { class: 'pager', 'aria-label': 'Pages' },
      answer.newer !== null ? link('/runs', '← Newer', page('after', answer.newer), { rel: 'prev', 'data-page': 'newer' }) : null,
      !first ? link('/runs', 'Newest', withoutCursor(params), { 'data-page': 'newest' }) : null,
      answer.older !== null ? link('/runs', 'Older →', page('before', answer.older), { rel: 'next', 'data-page': 'older' }) : null,
    );
  }

  return stop;
}

function row(run: RunSummary): HTMLElement {
  return h(
    'tr',
    { 'data-run-id': run.id },
    h('td', null, link(`/runs/${encodeURIComponent(run.id)}`, h('code', { title: run.id }, shortId(run.id)), undefined, { class: 'run-link' })),
    h('td', { class: 'run-name' }, run.name, run.type === 'workflow' ? h('span', { class: 'tag' }, 'workflow') : null),
    h('td', { class: 'run-queue' }, run.queue),
    h('td', { class: 'run-state' }, run.dueAt !== null ? scheduledBadge(run.dueAt) : stateBadge(run.state)),
    h('td', { class: 'run-unique-key' }, run.uniqueKey ?? h('span', { class: 'muted' }, '—')),
    h('td', null, timeCell(run.createdAt)),
    h('td', null, timeCell(run.finishedAt)),
  );
}

function withoutCursor(params: URLSearchParams): URLSearchParams {
  const next = new URLSearchParams(params);
  next.delete('before');
  next.delete('after');
  return next;
}

/** The filters as the API takes them: the page's own, without its paging. */
function filtersOf(params: URLSearchParams): URLSearchParams {
  const filters = new URLSearchParams();
  for (const name of FILTERS) if (params.has(name)) filters.set(name, params.get(name)!);
  return filters;
}

/**
 * Retry or cancel every run the filters match: the server counts the runs
 * the action applies to, the reader confirms that count, and the server acts
 * on those runs (none created since), or refuses if more match by then.
 */
function bulkActions(params: URLSearchParams, ctx: PageContext, refresh: () => Promise<void>): HTMLElement | null {
  const filters = filtersOf(params);
  const shown = [...filters].map(([name, value]) => `${name}: ${value}`).join(', ');
  const where = shown === '' ? 'among all runs' : `matching ${shown}`;
  const button = (action: BulkAction, label: string, noun: string, verb: string, danger: boolean) =>
    actionButton(
      ctx,
      label,
      async (): Promise<BulkResult | string | null> => {
        const preview: BulkPreview = await api.bulkPreview(action, filters);
        if (preview.count === 0) return `No ${noun} ${where}.`;
        if (preview.tooMany) return `More than ${count(preview.limit)} ${noun} ${where}: narrow the filters to act on them.`;
        if (!window.confirm(`${verb} ${count(preview.count)} ${noun} ${where}?`)) return null;
        return api.bulk(action, filters, preview);
      },
      {
        name: `bulk-${action}`,
        danger,
        done: (result) => {
          if (result === null) return null;
          if (typeof result === 'string') return { message: result, kind: 'error' };
          const failed = result.failed.map((f) => `\n${f.runId}: ${f.message}`).join('');
          return {
            message: `${verb}: ${count(result.changed)} of ${count(result.matched)} ${noun}.${failed === '' ? '' : ` Not done:${failed}`}`,
            kind: result.failed.length === 0 ? 'ok' : 'error',
          };
        },
        after: refresh,
      },
    );
  const retry = button('retry', 'Retry failed runs…', 'failed runs', 'Retry', false);
  const cancel = button('cancel', 'Cancel runs…', 'running or paused runs', 'Cancel', true);
  if (!retry && !cancel) return null;
  return h('div', { class: 'toolbar bulk', 'aria-label': 'Actions on the runs these filters match' }, retry, cancel);
}

/**
 * The filters; applying them goes to the first page of what they match. The
 * kind and queue pickers offer the names that have runs or that clients
 * registered, loaded once the form is drawn.
 */
function filterForm(params: URLSearchParams, ctx: PageContext): HTMLElement {
  const input = (name: string, label: string, attributes: Record<string, string> = {}) =>
    h('label', null, h('span', null, label), h('input', { name, value: params.get(name) ?? '', autocomplete: 'off', ...attributes }));
  const state = h(
    'select',
    { name: 'state' },
    h('option', { value: '' }, 'any'),
    STATES.map((s) => h('option', { value: s, selected: params.get('state') === s }, s)),
  );
  const kind = picker('kind', params);
  const queue = picker('queue', params);
  api.names().then(
    (names) => {
      fillPicker(kind, names.kinds, params.get('kind'));
      fillPicker(queue, names.queues, params.get('queue'));
    },
    (error: unknown) => ctx.flash(`The kinds and queues to pick from could not be loaded: ${describeError(error)}`, 'error'),
  );
  const from = h('input', { name: 'from', type: 'datetime-local', step: 1, value: toLocalInput(params.get('from')) });
  const to = h('input', { name: 'to', type: 'datetime-local', step: 1, value: toLocalInput(params.get('to')) });
  const form = h(
    'form',
    { class: 'filters', role: 'search' },
    input('q', 'Run id or unique key', { type: 'search', class: 'wide', placeholder: 'search' }),
    h('label', null, h('span', null, 'State'), state),
    h('label', null, h('span', null, 'Kind or workflow'), kind),
    h('label', null, h('span', null, 'Queue'), queue),
    h('label', null, h('span', null, 'Created from'), from),
    h('label', null, h('span', null, 'to'), to),
    h('div', { class: 'buttons' }, h('button', { type: 'submit' }, 'Apply'), link('/runs', 'Clear', undefined, { class: 'button-link' })),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const [name, value] of new FormData(form)) {
      const text = String(value).trim();
      if (text === '') continue;
      next.set(name, name === 'from' || name === 'to' ? fromLocalInput(text) : text);
    }
    ctx.navigate('/runs', next);
  });
  return form;
}

/** A picker of names: any, the one the filter holds, the others once loaded. */
function picker(name: 'kind' | 'queue', params: URLSearchParams): HTMLSelectElement {
  const current = params.get(name);
  return h('select', { name, 'data-picker': name }, h('option', { value: '' }, 'any'), current !== null ? h('option', { value: current, selected: true }, current) : null);
}

function fillPicker(select: HTMLSelectElement, names: string[], current: string | null): void {
  const chosen = select.value;
  show(
    select,
    h('option', { value: '' }, 'any'),
    // A filter's name that nothing has any more stays pickable.
    [...new Set([...names, ...(current !== null ? [current] : [])])].sort().map((n) => h('option', { value: n, selected: n === chosen }, n)),
  );
}

/** An ISO time as a datetime-local input shows it (the reader's local time). */
function toLocalInput(iso: string | null): string {
  if (iso === null) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A datetime-local value (local time) as ISO 8601; text it cannot read goes to the API as it is, which says what is wrong. */
function fromLocalInput(value: string): string {
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? value : d.toISOString();
}
