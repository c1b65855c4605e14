import { h } from './dom.js';

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

/** A time as the reader's local clock shows it, to the second. */
export function time(iso: string | null): string {
  if (iso === null) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A time element: the local time, the exact ISO time on hover. */
export function timeCell(iso: string | null): HTMLElement {
  return iso === null ? h('span', { class: 'muted' }, '—') : h('time', { datetime: iso, title: iso }, time(iso));
}

export function duration(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return '—';
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  const seconds = ms / 1_000;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  const minutes = seconds / 60;
  if (minutes < 60) return `${Math.floor(minutes)} min ${Math.round(seconds % 60)} s`;
  const hours = minutes / 60;
  if (hours < 48) return `${Math.floor(hours)} h ${Math.round(minutes % 60)} min`;
  return `${Math.round(hours / 24)} d`;
}

export function between(from: string | null, to: string | null): string {
  if (from === null || to === null) return '—';
  // The browser's clock may lag the server's a little: never a negative time.
  return duration(Math.max(0, new Date(to).getTime() - new Date(from).getTime()));
}

export function count(n: number): string {
  return n.toLocaleString('en-US');
}

export function rate(perMinute: number): string {
  if (perMinute === 0) return '0';
  return perMinute >= 100 ? count(Math.round(perMinute)) : perMinute.toFixed(perMinute >= 10 ? 1 : 2);
}

/** The shortened run id a table shows; the whole id is in the title. */
export function shortId(id: string): string {
  return id.slice(0, 8) + '…' + id.slice(-4);
}

/** Largest JSON text shown at once; the rest is behind a button. */
const SHOWN_CHARS = 20_000;

/** JSON of a value from a job, as preformatted text. */
export function jsonBlock(value: unknown, label: string): HTMLElement {
  const text = JSON.stringify(value, null, 2) ?? 'null';
  const pre = h('pre', { class: 'json', 'aria-label': label }, text.length > SHOWN_CHARS ? text.slice(0, SHOWN_CHARS) : text);
  if (text.length <= SHOWN_CHARS) return pre;
  const more = h(
    'button',
    {
      type: 'button',
      class: 'link',
      onclick: () => {
        pre.textContent = text;
        more.remove();
      },
    },
    `Show all ${count(text.length)} characters`,
  );
  return h('div', null, pre, more);
}

/**
 * A step's progress (`ctx.progress(value)`): a number from 0 to 100, or an
 * object with a numeric `percent`, is drawn as a bar; any value is shown as JSON.
 */
export function progressView(progress: unknown): HTMLElement | null {
  if (progress === null || progress === undefined) return null;
  const percent =
    typeof progress === 'number'
      ? progress
      : typeof progress === 'object' && typeof (progress as { percent?: unknown }).percent === 'number'
        ? (progress as { percent: number }).percent
        : null;
  const bar =
    percent !== null && Number.isFinite(percent)
      ? (() => {
          const clamped = Math.min(100, Math.max(0, percent));
          const fill = h('span', { class: 'fill' });
          fill.style.width = `${clamped}%`;
          return h(
            'span',
            { class: 'progress', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-valuenow': clamped },
            fill,
            h('span', { class: 'label' }, `${Math.round(clamped)}%`),
          );
        })()
      : null;
  return h('div', { class: 'progress-view' }, bar, typeof progress === 'number' ? null : jsonBlock(progress, 'progress'));
}

/** A state as a coloured badge. */
export function stateBadge(state: string): HTMLElement {
  return h('span', { class: `badge state-${state.replace(/[^a-z_]/g, '')}`, 'data-state': state }, state.replace('_', ' '));
}

/**
 * A run or step that waits for a later time (processIn or processAt, a
 * retry's backoff, a snooze): "scheduled" and when it is due, not "running"
 * or "available", which would say a worker has it or could take it now.
 */
export function scheduledBadge(dueAt: string): HTMLElement {
  return h('span', { class: 'scheduled' }, stateBadge('scheduled'), ' ', h('span', { class: 'muted due' }, 'due ', timeCell(dueAt)));
}

/** A step's state as the pages show it: an available step not due yet is scheduled. */
export function shownState(step: { state: string; scheduledAt: string }): string {
  return step.state === 'available' && Date.parse(step.scheduledAt) > Date.now() ? 'scheduled' : step.state;
}

/** The colour of each attempt outcome: the step state it resembles. */
const OUTCOME_COLOURS: Record<string, string> = {
  completed: 'completed',
  retried: 'waiting_timer',
  discarded: 'discarded',
  timed_out: 'discarded',
  cancelled: 'cancelled',
  reclaimed: 'paused',
  snoozed: 'waiting_timer',
  suspended: 'pending',
};

/** What ended an attempt as a badge; an attempt still going is running. */
export function outcomeBadge(outcome: string | null): HTMLElement {
  const shown = outcome ?? 'running';
  return h('span', { class: `badge state-${OUTCOME_COLOURS[shown] ?? 'running'}`, 'data-outcome': shown }, shown.replace('_', ' '));
}
