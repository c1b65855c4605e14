import { api } from './api.js';
import type { Schedule, SchedulesAnswer } from './api-types.js';
import { h, show } from './dom.js';
import { timeCell } from './format.js';
import { emptyState, link, poll, problem, type PageContext, type PageStop } from './page.js';

/** The durable cron schedules and their next and last ticks. */
export function schedulesPage(root: HTMLElement, _ctx: PageContext): PageStop {
  const body = h('div', { class: 'page-body' });
  show(root, h('h1', null, 'Schedules'), body);
  const { stop } = poll(async () => {
    try {
      render(await api.schedules());
    } catch (error) {
      show(body, problem(error));
    }
  }, 10_000);

  function render(answer: SchedulesAnswer): void {
    if (answer.schedules.length === 0) {
      show(body, emptyState('No schedules.', "This app defines none: give a @Step a schedule, or CycloneModule the schedules option."));
      return;
    }
    show(
      body,
      h(
        'table',
        { class: 'grid schedules' },
        h(
          'thead',
          null,
          h('tr', null, h('th', null, 'Name'), h('th', null, 'Kind'), h('th', null, 'Cron'), h('th', null, 'Time zone'), h('th', null, 'Next tick'), h('th', null, 'Last tick')),
        ),
        h('tbody', null, answer.schedules.map(row)),
      ),
    );
  }

  return stop;
}

function row(schedule: Schedule): HTMLElement {
  return h(
    'tr',
    { 'data-schedule': schedule.name },
    h('td', { class: 'schedule-name' }, schedule.name),
    h('td', null, link('/runs', schedule.kind, new URLSearchParams({ kind: schedule.kind }), { class: 'schedule-kind' })),
    h('td', null, h('code', { class: 'schedule-cron' }, schedule.cron)),
    h('td', null, schedule.timezone ?? h('span', { class: 'muted' }, 'server time')),
    h('td', null, timeCell(schedule.nextTickAt)),
    h('td', null, timeCell(schedule.lastTickAt)),
  );
}
