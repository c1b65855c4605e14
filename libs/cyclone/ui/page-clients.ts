import { api } from './api.js';
import type { Client, ClientsAnswer } from './api-types.js';
import { h, show } from './dom.js';
import { between, timeCell } from './format.js';
import { emptyState, link, poll, problem, type PageContext, type PageStop } from './page.js';

/** The clients running now: each one's id, host, the queues it serves with their slots in use, and its last heartbeat. */
export function clientsPage(root: HTMLElement, _ctx: PageContext): PageStop {
  const body = h('div', { class: 'page-body' });
  show(root, h('h1', null, 'Clients'), body);
  const { stop } = poll(async () => {
    try {
      render(await api.clients());
    } catch (error) {
      show(body, problem(error));
    }
  }, 5_000);

  function render(answer: ClientsAnswer): void {
    if (answer.clients.length === 0) {
      show(body, emptyState('No client is running.', 'A client shows here from its start until it shuts down.'));
      return;
    }
    show(
      body,
      h(
        'table',
        { class: 'grid clients' },
        h(
          'thead',
          null,
          h(
            'tr',
            null,
            h('th', null, 'Client'),
            h('th', null, 'Host'),
            h('th', null, 'Queues (slots in use)'),
            h('th', null, 'Version'),
            h('th', null, 'Started'),
            h('th', null, 'Last heartbeat'),
          ),
        ),
        h('tbody', null, answer.clients.map((client) => row(client, answer.at))),
      ),
      h(
        'p',
        { class: 'muted small' },
        `A client refreshes its row every ${answer.refreshIntervalSeconds} s; one that has not for ${3 * answer.refreshIntervalSeconds} s is gone. ` +
          'An enqueue-only client serves no queue.',
      ),
    );
  }

  return stop;
}

function row(client: Client, at: string): HTMLElement {
  return h(
    'tr',
    { 'data-client': client.id },
    h('td', null, h('code', { class: 'client-id' }, client.id)),
    h('td', { class: 'client-host' }, `${client.host} (pid ${client.pid})`),
    h(
      'td',
      { class: 'client-queues' },
      client.queues.length === 0
        ? h('span', { class: 'muted' }, 'enqueue only')
        : client.queues.map((q) =>
            h(
              'span',
              { class: 'client-queue', 'data-queue': q.name, 'data-running': q.running, 'data-slots': q.slots },
              link(`/queues/${encodeURIComponent(q.name)}`, q.name),
              ` ${q.running}/${q.slots}`,
            ),
          ),
    ),
    h('td', null, client.version ?? h('span', { class: 'muted' }, '—')),
    h('td', null, timeCell(client.startedAt)),
    h('td', null, timeCell(client.heartbeatAt), h('span', { class: 'muted small' }, ` ${between(client.heartbeatAt, at)} ago`)),
  );
}
