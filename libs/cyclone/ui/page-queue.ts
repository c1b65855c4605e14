import { api } from './api.js';
import type { Client, Queue, ThroughputAnswer } from './api-types.js';
import { throughputChart } from './chart.js';
import { h, show } from './dom.js';
import { count, duration, timeCell } from './format.js';
import { emptyState, link, poll, problem, type PageContext, type PageStop } from './page.js';

/** One queue: its counts, its throughput over the last hour as a chart, and the clients that serve it. */
export function queuePage(root: HTMLElement, _ctx: PageContext, name: string): PageStop {
  const head = h('div', { class: 'run-head' });
  const body = h('div', { class: 'page-body' });
  show(root, h('p', { class: 'crumbs' }, link('/queues', '← Queues')), head, body);
  const { stop } = poll(async () => {
    try {
      const [queues, throughput, clients] = await Promise.all([api.queues(), api.throughput(name), api.clients()]);
      render(queues.queues.find((q) => q.name === name) ?? null, throughput, clients.clients);
    } catch (error) {
      show(body, problem(error));
    }
  }, 10_000);

  function render(queue: Queue | null, throughput: ThroughputAnswer, clients: Client[]): void {
    const serving = clients.filter((c) => c.queues.some((q) => q.name === name));
    const total = throughput.minutes.reduce((sum, m) => ({ completed: sum.completed + m.completed, failed: sum.failed + m.failed }), {
      completed: 0,
      failed: 0,
    });
    show(
      head,
      h('h1', null, 'Queue ', h('span', { class: 'queue-title' }, name)),
      queue
        ? h(
            'dl',
            { class: 'facts' },
            fact('Available', count(queue.available)),
            fact('Scheduled', count(queue.scheduled)),
            fact('Running', count(queue.running)),
            fact('Failed', count(queue.failed)),
            fact('Oldest wait', queue.oldestAvailableMs === null ? '—' : duration(queue.oldestAvailableMs)),
            fact('Status', queue.isPaused ? 'paused' : 'active'),
            queue.outbox
              ? fact(
                  'Outbox',
                  `${count(queue.outbox.rows)} to publish` + (queue.outbox.oldestMs === null ? '' : `, oldest ${duration(queue.outbox.oldestMs)}`),
                )
              : null,
          )
        : h('p', { class: 'muted' }, 'Nothing waits, runs or has failed in this queue.'),
      h('p', null, link('/runs', 'Its runs →', new URLSearchParams({ queue: name }), { class: 'queue-runs' })),
    );
    show(
      body,
      h(
        'section',
        { class: 'card', 'aria-label': 'Throughput' },
        h('h2', null, 'The last hour'),
        h(
          'p',
          { class: 'muted small' },
          `Steps finished per minute: ${count(total.completed)} completed, ${count(total.failed)} failed in the hour.`,
          throughput.minutes.some((m) => m.estimated) ? ' Busy minutes are estimated from their latest steps.' : '',
        ),
        h('div', { class: 'chart-scroll' }, throughputChart(throughput)),
        h('p', { class: 'legend' }, h('span', { class: 'key state-completed' }, 'completed'), h('span', { class: 'key state-discarded' }, 'failed')),
      ),
      h(
        'section',
        { class: 'card', 'aria-label': 'Clients' },
        h('h2', null, 'Clients serving it'),
        serving.length === 0
          ? emptyState('No client serves this queue now.', 'Its steps wait until one does.')
          : h(
              'table',
              { class: 'grid queue-clients' },
              h('thead', null, h('tr', null, h('th', null, 'Client'), h('th', { class: 'num' }, 'Slots in use'), h('th', null, 'Last heartbeat'))),
              h(
                'tbody',
                null,
                serving.map((client) => {
                  const slots = client.queues.find((q) => q.name === name)!;
                  return h(
                    'tr',
                    { 'data-client': client.id },
                    h('td', null, h('code', null, client.id)),
                    h('td', { class: 'num' }, `${slots.running} of ${slots.slots}`),
                    h('td', null, timeCell(client.heartbeatAt)),
                  );
                }),
              ),
            ),
      ),
    );
  }

  return stop;
}

function fact(term: string, value: string): HTMLElement[] {
  return [h('dt', null, term), h('dd', null, value)];
}
