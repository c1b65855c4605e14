import { api } from './api.js';
import type { Queue, QueuesAnswer } from './api-types.js';
import { h, show } from './dom.js';
import { count, duration, rate } from './format.js';
import { actionButton, emptyState, link, poll, problem, type PageContext, type PageStop } from './page.js';

/** Every queue: what waits, runs, failed and is paused in it, and how fast it drains. */
export function queuesPage(root: HTMLElement, ctx: PageContext): PageStop {
  const body = h('div', { class: 'page-body' });
  show(root, h('h1', null, 'Queues'), body);
  const { stop, refresh } = poll(async () => {
    try {
      render(await api.queues());
    } catch (error) {
      show(body, problem(error));
    }
  }, 3_000);

  function render(answer: QueuesAnswer): void {
    if (answer.queues.length === 0) {
      show(body, emptyState('No queues yet.', 'A queue shows here once a job is enqueued on it or a worker serves it.'));
      return;
    }
    const minutes = Math.round(answer.throughputWindowSeconds / 60);
    show(
      body,
      h(
        'table',
        { class: 'grid queues' },
        h(
          'thead',
          null,
          h(
            'tr',
            null,
            h('th', null, 'Queue'),
            h('th', { class: 'num' }, 'Available'),
            h('th', { class: 'num' }, 'Scheduled'),
            h('th', { class: 'num' }, 'Running'),
            h('th', { class: 'num' }, 'Failed'),
            h('th', { class: 'num' }, 'Paused'),
            h('th', { class: 'num', title: 'How long the oldest due step has waited' }, 'Oldest wait'),
            h('th', { class: 'num', title: `Steps finished per minute over the last ${minutes} minutes` }, 'Completed/min'),
            h('th', { class: 'num' }, 'Failed/min'),
            h('th', null, 'Status'),
            h('th', null, ''),
          ),
        ),
        h('tbody', null, answer.queues.map(row)),
      ),
      h(
        'p',
        { class: 'muted small' },
        `Throughput over the last ${minutes} minutes; a queue's page charts its last hour. ` +
          "Counts are steps; failed steps are kept until their run's retention ends.",
      ),
    );
  }

  function row(queue: Queue): HTMLElement {
    const runs = (state?: string) => {
      const params = new URLSearchParams({ queue: queue.name });
      if (state) params.set('state', state);
      return params;
    };
    return h(
      'tr',
      { 'data-queue': queue.name },
      h('td', null, link(`/queues/${encodeURIComponent(queue.name)}`, queue.name, undefined, { class: 'queue-name' })),
      h('td', { class: 'num', 'data-count': 'available' }, count(queue.available)),
      h('td', { class: 'num', 'data-count': 'scheduled' }, count(queue.scheduled)),
      h('td', { class: 'num', 'data-count': 'running' }, count(queue.running)),
      h(
        'td',
        { class: `num${queue.failed > 0 ? ' bad' : ''}`, 'data-count': 'failed' },
        queue.failed > 0 ? link('/runs', count(queue.failed), runs('failed')) : '0',
      ),
      h('td', { class: 'num', 'data-count': 'paused' }, count(queue.paused)),
      h('td', { class: 'num' }, queue.oldestAvailableMs === null ? '—' : duration(queue.oldestAvailableMs)),
      h('td', { class: 'num', 'data-count': 'completed-per-minute' }, rate(queue.throughput.completedPerMinute)),
      h('td', { class: 'num', 'data-count': 'failed-per-minute' }, rate(queue.throughput.failedPerMinute)),
      h(
        'td',
        null,
        queue.isPaused ? h('span', { class: 'badge state-paused', 'data-queue-state': 'paused' }, 'paused') : h('span', { class: 'badge state-ok', 'data-queue-state': 'active' }, 'active'),
        queue.servedHere ? h('span', { class: 'muted small', title: 'This process runs workers for the queue' }, ' served here') : null,
      ),
      h(
        'td',
        { class: 'actions' },
        queue.isPaused
          ? actionButton(ctx, 'Resume', () => api.resumeQueue(queue.name), {
              name: 'resume-queue',
              done: `Queue ${queue.name} resumed: workers claim from it again.`,
              after: refresh,
            })
          : actionButton(ctx, 'Pause', () => api.pauseQueue(queue.name), {
              name: 'pause-queue',
              done: `Queue ${queue.name} paused: no worker claims from it until it is resumed.`,
              after: refresh,
            }),
      ),
    );
  }

  return stop;
}
