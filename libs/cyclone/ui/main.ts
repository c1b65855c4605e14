import { h, show } from './dom.js';
import type { PageContext, PageStop } from './page.js';
import { clientsPage } from './page-clients.js';
import { queuePage } from './page-queue.js';
import { queuesPage } from './page-queues.js';
import { runPage } from './page-run.js';
import { runsPage } from './page-runs.js';
import { schedulesPage } from './page-schedules.js';
import { href, settings } from './settings.js';

/*
 * The dashboard's shell: a header with the pages, a line for messages, and
 * the page itself, chosen from the address. Pages are drawn from the JSON
 * API; moving between them changes the address without a reload.
 */

const NAV = [
  ['/queues', 'Queues'],
  ['/runs', 'Runs'],
  ['/schedules', 'Schedules'],
  ['/clients', 'Clients'],
] as const;

const nav = h('nav', { class: 'tabs', 'aria-label': 'Pages' });
const flashLine = h('div', { class: 'flash', role: 'status', 'aria-live': 'polite' });
const main = h('main', { id: 'page' });

document.body.append(
  h(
    'header',
    { class: 'top' },
    h('a', { class: 'brand', href: href('/queues'), 'data-nav': '' }, h('img', { src: href('/assets/favicon.svg'), alt: '' }), 'Cyclone'),
    nav,
    settings.readOnly ? h('span', { class: 'badge read-only', title: 'Actions are turned off on this dashboard' }, 'read-only') : null,
  ),
  flashLine,
  main,
);

let stopPage: PageStop | null = null;
let flashTimer: number | undefined;

const context = (params: URLSearchParams): PageContext => ({
  params,
  navigate,
  flash(message, kind = 'ok') {
    window.clearTimeout(flashTimer);
    show(flashLine, h('div', { class: `notice ${kind}`, 'data-flash': kind }, message));
    flashTimer = window.setTimeout(() => show(flashLine), kind === 'ok' ? 5_000 : 15_000);
  },
});

/** The page's route: the address below the dashboard's base. */
function route(): string {
  const path = location.pathname;
  const below = path.startsWith(settings.base) ? path.slice(settings.base.length) : path;
  return below.replace(/\/+$/, '') || '/queues';
}

function render(): void {
  stopPage?.();
  const current = route();
  const params = new URLSearchParams(location.search);
  const ctx = context(params);
  show(
    nav,
    NAV.map(([to, label]) =>
      h('a', { href: href(to), 'data-nav': '', 'aria-current': current === to || current.startsWith(`${to}/`) ? 'page' : null }, label),
    ),
  );
  const run = /^\/runs\/([^/]+)$/.exec(current);
  const queue = /^\/queues\/([^/]+)$/.exec(current);
  if (current === '/queues') stopPage = queuesPage(main, ctx);
  else if (queue) stopPage = queuePage(main, ctx, decodeSegment(queue[1]));
  else if (current === '/clients') stopPage = clientsPage(main, ctx);
  else if (current === '/runs') stopPage = runsPage(main, ctx);
  else if (run) stopPage = runPage(main, ctx, decodeSegment(run[1]));
  else if (current === '/schedules') stopPage = schedulesPage(main, ctx);
  else {
    stopPage = null;
    show(main, h('h1', null, 'Not found'), h('p', null, 'The dashboard has no such page.'));
  }
  document.title = `Cyclone · ${current.split('/')[1] ?? 'queues'}`;
}

/** A path segment as text; a malformed escape is kept as it is (the API then says the id is not one). */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function navigate(to: string, params?: URLSearchParams): void {
  history.pushState(null, '', href(to, params));
  show(flashLine);
  render();
  window.scrollTo(0, 0);
}

// Links inside the dashboard are followed here; a modified click (new tab) is left to the browser.
document.addEventListener('click', (event) => {
  const anchor = (event.target as Element | null)?.closest?.('a[data-nav]') as HTMLAnchorElement | null;
  if (!anchor || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const url = new URL(anchor.href);
  if (url.origin !== location.origin) return;
  event.preventDefault();
  history.pushState(null, '', url.pathname + url.search);
  show(flashLine);
  render();
  window.scrollTo(0, 0);
});

window.addEventListener('popstate', render);
render();
