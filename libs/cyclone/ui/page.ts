import { ApiError } from './api.js';
import { h, type Child } from './dom.js';
import { href, settings } from './settings.js';

/** What a page gets from the shell around it. */
export interface PageContext {
  /** The page's query parameters (the runs list's filters). */
  params: URLSearchParams;
  /** Goes to another page of the dashboard without reloading. */
  navigate(route: string, params?: URLSearchParams): void;
  /** A short message at the top of the page: what an action did, or why it failed. */
  flash(message: string, kind?: 'ok' | 'error'): void;
}

/** A mounted page: `stop` ends its polling when the reader leaves it. */
export type PageStop = () => void;

/**
 * Runs `load` now and again `everyMs` after each load has finished (never
 * two at once), pausing while the tab is hidden. `refresh()` loads at once.
 */
export function poll(load: () => Promise<void>, everyMs: number | (() => number)): { stop: PageStop; refresh: () => Promise<void> } {
  let timer: number | undefined;
  let stopped = false;
  let running: Promise<void> | null = null;
  const tick = async () => {
    window.clearTimeout(timer);
    if (stopped) return;
    running ??= load().finally(() => (running = null));
    await running;
    const wait = typeof everyMs === 'function' ? everyMs() : everyMs;
    if (!stopped) timer = window.setTimeout(() => void (document.hidden ? waitVisible() : tick()), wait);
  };
  const waitVisible = () =>
    document.addEventListener('visibilitychange', () => void tick(), { once: true });
  void tick();
  return {
    stop: () => {
      stopped = true;
      window.clearTimeout(timer);
    },
    refresh: tick,
  };
}

/** An in-dashboard link: a real href (open in a new tab works), followed without a reload. */
export function link(route: string, label: Child, params?: URLSearchParams, attributes: Record<string, string> = {}): HTMLAnchorElement {
  return h('a', { href: href(route, params), 'data-nav': '', ...attributes }, label);
}

/** The message of an error from the API, or of anything else that went wrong. */
export function describeError(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  return error instanceof Error ? error.message : String(error);
}

/** A message shown instead of a page's content when its data cannot be loaded. */
export function problem(error: unknown): HTMLElement {
  return h('div', { class: 'notice error', role: 'alert' }, describeError(error));
}

export function emptyState(title: string, ...detail: Child[]): HTMLElement {
  return h('div', { class: 'empty' }, h('strong', null, title), detail.length > 0 ? h('p', null, ...detail) : null);
}

/**
 * A button that runs an action: disabled while it runs, confirmed first
 * when `confirm` is set, its outcome flashed. Not made at all on a
 * read-only dashboard (the server has no route for it either).
 */
export function actionButton<T>(
  ctx: PageContext,
  label: string,
  action: () => Promise<T>,
  options: {
    confirm?: string;
    danger?: boolean;
    /** What to flash when it is done: a text, or one made from the action's result (null: nothing was done). */
    done?: string | ((result: T) => { message: string; kind: 'ok' | 'error' } | null);
    after?: () => unknown;
    name?: string;
  } = {},
): HTMLButtonElement | null {
  if (settings.readOnly) return null;
  const button = h('button', {
    type: 'button',
    class: options.danger ? 'danger' : 'action',
    'data-action': options.name ?? label.toLowerCase().replace(/\s+/g, '-'),
  }, label);
  button.addEventListener('click', async () => {
    if (options.confirm && !window.confirm(options.confirm)) return;
    button.disabled = true;
    try {
      const result = await action();
      const done = typeof options.done === 'function' ? options.done(result) : { message: options.done ?? `${label}: done.`, kind: 'ok' as const };
      if (done === null) return;
      ctx.flash(done.message, done.kind);
      await options.after?.();
    } catch (error) {
      ctx.flash(describeError(error), 'error');
    } finally {
      button.disabled = false;
    }
  });
  return button;
}
