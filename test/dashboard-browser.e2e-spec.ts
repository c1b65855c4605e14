import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { CycloneStats, defineWorkflow, PermanentError, Step, Workflow, type StepContext, type WorkflowContext } from 'cyclone-nestjs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { browserTestsEnabled, launchChromium, SCREENSHOTS } from './support/browser.js';
import { DASHBOARD_USER, DashboardApp, TestBasicAuthGuard } from './support/dashboard-app.js';
import { HandlerProbe } from './support/handler-probe.js';
import { waitFor } from './support/wait.js';

/**
 * The dashboard in a real browser (Debian's Chromium driven by
 * playwright-core): each page loads and draws from the API, a run is
 * followed from the list to its graph, a failed run is retried and a
 * running one cancelled from their pages, the guard and read-only mode hold,
 * and every value a job brings is shown as text. A screenshot of each page
 * goes to .artifacts/dashboard/.
 */

/** Values that would run script or break out of an attribute if a page put them in as HTML. */
const XSS = {
  kind: `<img src=x onerror="window.__xss='kind'">`,
  queue: `"><svg onload="window.__xss='queue'">`,
  uniqueKey: `' onmouseover='window.__xss="key"' data-x='`,
  input: `</script><script>window.__xss='input'</script>`,
  error: `<b onclick="window.__xss='error'">boom</b><img src=x onerror="window.__xss='error'">`,
  node: `"><img src=x onerror="window.__xss='node'">`,
  output: `<iframe srcdoc="<script>parent.__xss='output'</script>"></iframe>`,
};

const probe = new HandlerProbe();

const clientIdOf = (on: DashboardApp) => on.app.get(CycloneStats).clientId;
const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

@Injectable()
class BrowserSteps {
  /** A kind, queue, error and output made of markup: fails for good once, and a retry succeeds. */
  @Step(XSS.kind, { queue: XSS.queue })
  async hostile(_input: unknown, ctx: StepContext) {
    if (ctx.attempt === 1) throw new PermanentError(XSS.error);
    return { html: XSS.output };
  }

  @Step('fetch_profile')
  async fetch(input: { userId: number }) {
    return { userId: input.userId, name: 'Ada' };
  }

  @Step('score_profile')
  async score() {
    return { score: 0.92 };
  }

  /** Runs until the test lets it go, or until its run is cancelled. */
  @Step('review')
  async review(_input: unknown, ctx: StepContext) {
    return probe.cooperate(ctx);
  }

  @Step('notify')
  async notify() {
    return 'sent';
  }

  /** Fails twice with markup for an error (each attempt kept, with its stack), then succeeds. */
  @Step('flaky_markup', { maxAttempts: 3, backoff: () => 0 })
  async flakyMarkup(_input: unknown, ctx: StepContext) {
    if (ctx.attempt < 3) throw new Error(XSS.error);
    return 'third time';
  }

  @Step('bulk_fails')
  async bulkFails(_input: unknown, ctx: StepContext) {
    if (ctx.attempt === 1) throw new PermanentError('fails once');
    return 'retried';
  }

  /** A workflow written as code: an inline call, a fan-out, a child run, and a wait under a hostile name. */
  @Workflow('checkout_code')
  async checkout(input: { items: string[] }, wf: WorkflowContext) {
    const total = await wf.run('price', () => input.items.length * 10);
    await Promise.all(input.items.map((item, i) => wf.step(`ship-${i}`, 'notify', { item })));
    await wf.startChild('receipt', 'notify', { total });
    await wf.waitForSignal(XSS.node);
    return total;
  }
}

const Flow = defineWorkflow<{ userId: number }>('signup_flow')
  .step('fetch', 'fetch_profile')
  .step('score', 'score_profile', { after: ['fetch'] })
  .step(XSS.node, 'review', { after: ['score'] })
  .step('notify', 'notify', { after: [XSS.node, 'fetch'] });

const cyclone = {
  queues: { default: { workers: 4 }, [XSS.queue]: { workers: 1 } },
  leaseTtl: '600ms',
  workflows: [Flow],
  // Once a year, so no run of it lands among the test's.
  schedules: [{ name: XSS.node, cron: '0 0 1 1 *', kind: XSS.kind }],
};

(browserTestsEnabled() ? describe : describe.skip)('the dashboard in Chromium', () => {
  let app: DashboardApp;
  let readOnly: DashboardApp;
  let browser: Browser;
  let context: BrowserContext;
  /** Errors the pages threw or logged (a CSP violation is logged): there must be none. */
  const pageErrors: string[] = [];
  let failedRun: string;
  let flowRun: string;

  beforeAll(async () => {
    [app, browser] = await Promise.all([DashboardApp.start({ providers: [BrowserSteps], cyclone }), launchChromium()]);
    readOnly = await DashboardApp.start({
      databaseUrl: app.databaseUrl,
      cyclone: { runWorkers: false },
      dashboard: { guard: TestBasicAuthGuard, readOnly: true },
    });
    context = await browser.newContext({ httpCredentials: DASHBOARD_USER, viewport: { width: 1280, height: 820 } });
    context.on('page', (page) => {
      page.on('pageerror', (err) => pageErrors.push(`${page.url()}: ${err.message}`));
      page.on('console', (message) => {
        if (message.type() === 'error') pageErrors.push(`${page.url()}: ${message.text()}`);
      });
    });

    failedRun = await app.client.enqueue(XSS.kind, { html: XSS.input }, { unique: XSS.uniqueKey });
    flowRun = await app.client.start(Flow, { userId: 7 });
    await app.client.enqueueMany('notify', [1, 2, 3]);
    await waitFor('the hostile run to fail', async () => (await app.client.getRun(failedRun)).state === 'failed');
    await probe.call(flowRun);
  }, 60_000);

  afterAll(async () => {
    probe.releaseAll();
    await context?.close();
    await browser?.close();
    await readOnly?.close();
    await app?.close();
  });

  async function open(path: string, ready: string, c: BrowserContext = context, origin = app.origin): Promise<Page> {
    const page = await c.newPage();
    const response = await page.goto(`${origin}${path}`);
    expect(response?.status()).toBe(200);
    await page.waitForSelector(ready);
    return page;
  }

  /** Nothing a job brought became markup: no handler attribute, no injected element, no script ran. */
  async function expectNothingInjected(page: Page): Promise<void> {
    // Runs in the page (the test's own types have no DOM).
    const found = await page.evaluate(() => {
      const window = globalThis as any;
      const document = window.document;
      return {
        ran: window.__xss ?? null,
        handlers: document.querySelectorAll('[onerror], [onload], [onclick], [onmouseover]').length,
        injected: document.querySelectorAll('img[src="x"], iframe, b, svg:not(.dag):not(.chart)').length,
        scripts: [...document.scripts].map((s: any) => s.getAttribute('src')),
        xAttribute: document.querySelectorAll('[data-x]').length,
      };
    });
    expect(found).toEqual({ ran: null, handlers: 0, injected: 0, scripts: [expect.stringMatching(/^\/cyclone\/assets\/main\.js\?v=/)], xAttribute: 0 });
    expect(pageErrors).toEqual([]);
  }

  const shoot = (page: Page, name: string) => page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });

  it('queues: every queue with its counts and throughput, names shown as text', async () => {
    const page = await open('/cyclone', 'table.queues');
    const names = await page.locator('tr[data-queue] .queue-name').allTextContents();
    expect(names).toEqual(expect.arrayContaining(['default', XSS.queue]));
    const hostile = page.locator('tr[data-queue]').filter({ has: page.getByText(XSS.queue, { exact: true }) });
    await expect(hostile.locator('[data-count="failed"]').textContent()).resolves.toBe('1');
    await expect(page.locator('nav.tabs a[aria-current="page"]').textContent()).resolves.toBe('Queues');
    await expectNothingInjected(page);
    await shoot(page, 'queues');
    await page.close();
  });

  it('runs: lists runs, filters them, and follows a workflow run to its graph with each node’s state', async () => {
    const page = await open('/cyclone/runs', 'table.runs');
    expect(await page.locator('tr[data-run-id]').count()).toBeGreaterThanOrEqual(5);
    await expect(page.locator(`tr[data-run-id="${failedRun}"] .run-name`).textContent()).resolves.toBe(XSS.kind);
    await expect(page.locator(`tr[data-run-id="${failedRun}"] .run-queue`).textContent()).resolves.toBe(XSS.queue);
    await expect(page.locator(`tr[data-run-id="${failedRun}"] .run-unique-key`).textContent()).resolves.toBe(XSS.uniqueKey);
    await expectNothingInjected(page);
    await shoot(page, 'runs');

    // Filter: only failed runs; the address keeps the filter.
    await page.selectOption('select[name="state"]', 'failed');
    await page.click('form.filters button[type="submit"]');
    await page.waitForURL(/state=failed/);
    await waitFor('the filtered list', async () => (await page.locator('tr[data-run-id]').count()) === 1);
    await expect(page.locator('tr[data-run-id]').getAttribute('data-run-id')).resolves.toBe(failedRun);

    // Follow the workflow run: search it by id, click through to its page.
    await page.fill('input[name="q"]', flowRun);
    await page.selectOption('select[name="state"]', '');
    await page.click('form.filters button[type="submit"]');
    await page.waitForSelector(`tr[data-run-id="${flowRun}"]`);
    await page.click(`tr[data-run-id="${flowRun}"] a.run-link`);
    await page.waitForURL(new RegExp(`/cyclone/runs/${flowRun}$`));
    await page.waitForSelector('svg.dag g.node');
    const drawn = await page.$$eval('svg.dag g.node', (nodes) =>
      nodes.map((n) => [n.getAttribute('data-node-id'), n.getAttribute('data-state')] as [string, string]),
    );
    const steps = await app.client.listSteps(flowRun);
    expect(new Map(drawn)).toEqual(new Map(steps.map((s) => [s.nodeId, s.state])));
    expect(new Map(drawn)).toEqual(new Map([['fetch', 'completed'], ['score', 'completed'], [XSS.node, 'running'], ['notify', 'pending']]));
    expect(await page.locator('svg.dag path.edge').count()).toBe(4);
    // The running node is selected first; another one is a click away.
    await expect(page.locator('.node-card .node-name').textContent()).resolves.toBe(XSS.node);
    await page.click('svg.dag g.node[data-node-id="score"]');
    await expect(page.locator('.node-card .node-name').textContent()).resolves.toBe('score');
    await expect(page.locator('.node-card pre.json').textContent()).resolves.toContain('"score": 0.92');
    await page.click(`svg.dag g.node[data-state="running"]`);
    await expectNothingInjected(page);
    await shoot(page, 'run-workflow');
    await page.close();
  });

  it('a code workflow: its calls in the order made, a fan-out as one entry, its child linked; a client without its version says so', async () => {
    const runId = await app.client.start('checkout_code', { items: ['a', 'b', 'c', 'd'] });
    await waitFor('the workflow to wait', async () =>
      (await app.client.listSteps(runId)).some((s) => s.nodeId === XSS.node && s.state === 'waiting_signal'),
    );
    const page = await open(`/cyclone/runs/${runId}`, 'ol.calls');
    await waitFor('the fan-out drawn completed', async () => (await page.locator('li.call-group .badge[data-state="completed"]').textContent()) === '4 completed');
    const drawn = await page.$$eval('ol.calls > li', (items) =>
      items.map((li) => li.getAttribute('data-node-id') ?? `group of ${li.getAttribute('data-count')} from ${li.getAttribute('data-group-of')}`),
    );
    expect(drawn).toEqual(['checkout_code', 'price', 'group of 4 from ship-0', 'receipt', XSS.node]);
    await expect(page.locator('.run-head .tag').textContent()).resolves.toBe('workflow · code v1');
    const states = await page.$$eval('ol.calls > li[data-node-id]', (items) => items.map((li) => [li.getAttribute('data-node-id'), li.getAttribute('data-state')]));
    expect(new Map(states as [string, string][]).get(XSS.node)).toBe('waiting_signal');
    await page.click('li.call-group button');
    await expect(page.locator('.node-card .node-name').textContent()).resolves.toBe('ship-0');
    await expect(page.locator('.node-card pre[aria-label="node input"]').textContent()).resolves.toBe(JSON.stringify({ item: 'a' }, null, 2));
    await page.click('li.call[data-node-id="receipt"] button');
    const child = (await app.client.listSteps(runId)).find((s) => s.nodeId === 'receipt')!.output as string;
    await expect(page.locator('.node-card a.child-run').textContent()).resolves.toBe(child);
    expect(await page.locator('.version-notice').count()).toBe(0);
    await expectNothingInjected(page);
    await shoot(page, 'run-code-workflow');
    await page.close();

    // The read-only app runs no workers, so no version of this workflow.
    const elsewhere = await open(`/cyclone/runs/${runId}`, 'ol.calls', context, readOnly.origin);
    await expect(elsewhere.locator('.version-notice').textContent()).resolves.toBe(
      'Started by version 1 of this workflow; this app does not run this workflow. A client that runs version 1 or later takes its passes.',
    );
    await elsewhere.close();
    await app.client.cancel(runId);
  });

  it('a failed run: its error, input and keys shown as text; Retry carries it on to completed', async () => {
    const page = await open(`/cyclone/runs/${failedRun}`, '.node-card');
    await expect(page.locator('.run-title').textContent()).resolves.toBe(XSS.kind);
    await expect(page.locator('.run-head .run-queue').textContent()).resolves.toBe(XSS.queue);
    await expect(page.locator('.run-head .run-unique-key').textContent()).resolves.toBe(XSS.uniqueKey);
    await expect(page.locator('.node-error').textContent()).resolves.toBe(XSS.error);
    await expect(page.locator('pre[aria-label="run input"]').textContent()).resolves.toBe(JSON.stringify({ html: XSS.input }, null, 2));
    await expect(page.locator('.run-head .badge').getAttribute('data-state')).resolves.toBe('failed');
    await expectNothingInjected(page);
    await shoot(page, 'run-failed');

    await page.click('button[data-action="retry-node"]');
    await page.waitForSelector('.run-head .badge[data-state="completed"]', { timeout: 15_000 });
    await expect(page.locator('[data-flash="ok"]').textContent()).resolves.toBe(`Node ${XSS.kind} retried.`);
    expect((await app.client.getRun(failedRun)).state).toBe('completed');
    await expect(page.locator('pre[aria-label="node output"]').textContent()).resolves.toBe(JSON.stringify({ html: XSS.output }, null, 2));
    await expectNothingInjected(page);
    await page.close();
  });

  it('a running run: shows its progress, and Cancel stops it and its handler', async () => {
    const runId = await app.client.enqueue('review', { doc: 12 });
    const call = await probe.call(runId);
    // The progress a step reports (ctx.progress) reaches the page through listSteps.
    const client = app.client as unknown as { listSteps: (id: string) => Promise<object[]> };
    const listSteps = client.listSteps;
    client.listSteps = async (id) => (await listSteps.call(app.client, id)).map((s) => ({ ...s, progress: { percent: 40, done: 4, of: 10 } }));
    try {
      const page = await open(`/cyclone/runs/${runId}`, '.node-card');
      await expect(page.locator('[role="progressbar"]').getAttribute('aria-valuenow')).resolves.toBe('40');
      page.once('dialog', (dialog) => void dialog.accept());
      await page.click('button[data-action="cancel"]');
      await page.waitForSelector('.run-head .badge[data-state="cancelled"]');
      expect((await app.client.getRun(runId)).state).toBe('cancelled');
      await expect(call.aborted).resolves.toMatchObject({ code: 'step_cancelled' });
      expect(await page.locator('button[data-action="cancel"]').count()).toBe(0);
      await expectNothingInjected(page);
      await page.close();
    } finally {
      client.listSteps = listSteps;
    }
  });

  it('a run delayed by an hour: scheduled with its due time in the list and on its page, not running', async () => {
    const runId = await app.client.enqueue('notify', { later: true }, { processIn: '1h' });
    const [{ scheduledAt }] = await app.client.listSteps(runId);
    const list = await open(`/cyclone/runs?q=${runId}`, `tr[data-run-id="${runId}"]`);
    const state = list.locator(`tr[data-run-id="${runId}"] .run-state`);
    await expect(state.locator('.badge').getAttribute('data-state')).resolves.toBe('scheduled');
    await expect(state.locator('time').getAttribute('datetime')).resolves.toBe(scheduledAt.toISOString());
    await expect(state.textContent()).resolves.toMatch(/^scheduled due \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
    await list.close();

    const page = await open(`/cyclone/runs/${runId}`, '.node-card');
    await expect(page.locator('.run-head .badge').getAttribute('data-state')).resolves.toBe('scheduled');
    await expect(page.locator('svg.dag g.node').getAttribute('data-state')).resolves.toBe('scheduled');
    await expect(page.locator('.node-card h2 .badge').getAttribute('data-state')).resolves.toBe('scheduled');
    await expect(page.locator('.node-card dd time').first().getAttribute('datetime')).resolves.toBe(scheduledAt.toISOString());
    await expectNothingInjected(page);
    await shoot(page, 'run-scheduled');
    await page.close();
    await app.client.cancel(runId);
  });

  it('pauses and resumes a queue from the queues page', async () => {
    const page = await open('/cyclone/queues', 'table.queues');
    const row = page.locator('tr[data-queue="default"]');
    await row.locator('button[data-action="pause-queue"]').click();
    await row.locator('[data-queue-state="paused"]').waitFor();
    expect(await app.client.pausedQueues()).toEqual(['default']);
    await row.locator('button[data-action="resume-queue"]').click();
    await row.locator('[data-queue-state="active"]').waitFor();
    expect(await app.client.pausedQueues()).toEqual([]);
    await page.close();
  });

  it('schedules: each one as text, and an empty page on a client that defines none', async () => {
    const listed = await open('/cyclone/schedules', 'table.schedules');
    await expect(listed.locator('.schedule-name').textContent()).resolves.toBe(XSS.node);
    await expect(listed.locator('.schedule-kind').textContent()).resolves.toBe(XSS.kind);
    await expectNothingInjected(listed);
    await shoot(listed, 'schedules');
    await listed.close();

    const empty = await open('/cyclone/schedules', '.empty', context, readOnly.origin);
    await expect(empty.locator('.empty strong').textContent()).resolves.toBe('No schedules.');
    await empty.close();
  });

  it('a run’s attempts: each with its outcome, worker and error, and its stack trace as text', async () => {
    const runId = await app.client.enqueue('flaky_markup', { attempts: 3 });
    await expect(app.client.result(runId)).resolves.toBe('third time');
    const page = await open(`/cyclone/runs/${runId}`, '.attempt-list');
    const attempts = page.locator('.node-card li.attempt');
    await expect(attempts.evaluateAll((items) => items.map((i) => [i.getAttribute('data-attempt'), i.getAttribute('data-outcome')]))).resolves.toEqual([
      ['1', 'retried'],
      ['2', 'retried'],
      ['3', 'completed'],
    ]);
    await expect(attempts.first().locator('pre.attempt-error').textContent()).resolves.toBe(`error: ${XSS.error}`);
    await expect(attempts.first().locator('.attempt-worker').textContent()).resolves.toBe(clientIdOf(app));
    // The stack trace is behind a click, and is the thrown Error's stack, as text.
    await attempts.first().locator('details.attempt-stack summary').click();
    const stack = await attempts.first().locator('pre.stack').textContent();
    expect(stack).toMatch(new RegExp(`^Error: ${escapeRegExp(XSS.error)}\\n\\s+at `));
    await attempts.nth(1).locator('details.attempt-stack summary').click();
    expect(await attempts.nth(2).locator('details.attempt-stack').count()).toBe(0);
    await expectNothingInjected(page);
    await shoot(page, 'run-attempts');
    await page.close();
  });

  it('run now: a delayed job is due at once, and runs', async () => {
    const runId = await app.client.enqueue('notify', { later: true }, { processIn: '1h' });
    const page = await open(`/cyclone/runs/${runId}`, '.node-card');
    await page.locator('.node-due').waitFor();
    await page.click('button[data-action="run-now"]');
    await page.waitForSelector('.run-head .badge[data-state="completed"]');
    await expect(page.locator('[data-flash="ok"]').textContent()).resolves.toBe('Node notify is due now; no attempt is used up.');
    await expect(app.client.result(runId)).resolves.toBe('sent');
    expect((await app.client.listSteps(runId))[0]).toMatchObject({ attempt: 1 });
    await page.close();
  });

  it('runs: kind and queue pickers from what exists; retry by filter, confirmed with the count, posts the page’s CSRF token', async () => {
    const failed = await app.client.enqueueMany('bulk_fails', [1, 2, 3]);
    await waitFor('the runs to fail', async () => (await Promise.all(failed.map((id) => app.client.getRun(id)))).every((r) => r.state === 'failed'));
    const page = await open('/cyclone/runs', 'table.runs');
    // The pickers: registered kinds (the hostile one as text), workflows with runs, served queues.
    const kinds = page.locator('select[data-picker="kind"] option');
    await waitFor('the kind picker', async () => (await kinds.count()) > 1);
    expect(await kinds.allTextContents()).toEqual(expect.arrayContaining(['any', 'bulk_fails', 'flaky_markup', 'signup_flow', XSS.kind]));
    expect(await page.locator('select[data-picker="queue"] option').allTextContents()).toEqual(expect.arrayContaining(['default', XSS.queue]));
    await page.selectOption('select[data-picker="kind"]', 'bulk_fails');
    await page.click('form.filters button[type="submit"]');
    await page.waitForURL(/kind=bulk_fails/);
    await waitFor('the filtered list', async () => (await page.locator('tr[data-run-id]').count()) === 3);

    // Accepted as it opens: a click whose page shows a confirm at once waits until it is answered.
    const confirmed = new Promise<string>((resolve) =>
      page.once('dialog', (d) => {
        resolve(d.message());
        void d.accept();
      }),
    );
    const posted = page.waitForRequest((request) => request.method() === 'POST' && request.url().includes('/api/bulk/retry'));
    await page.click('button[data-action="bulk-retry"]');
    expect(await confirmed).toBe('Retry 3 failed runs matching kind: bulk_fails?');
    const request = await posted;
    const token = await page.evaluate(() => (globalThis as any).document.body.dataset.csrfToken);
    expect(request.headers()['x-cyclone-csrf']).toBe(token);
    expect(new URL(request.url()).searchParams.get('confirmed')).toBe('3');
    await expect(page.locator('[data-flash="ok"]').textContent()).resolves.toBe('Retry: 3 of 3 failed runs.');
    for (const runId of failed) await expect(app.client.result(runId)).resolves.toBe('retried');

    // Cancelled at the confirmation: nothing is done.
    const more = await app.client.enqueue('bulk_fails', 4);
    await waitFor('it to fail', async () => (await app.client.getRun(more)).state === 'failed');
    page.once('dialog', (d) => void d.dismiss());
    await page.click('button[data-action="bulk-retry"]');
    await page.locator('button[data-action="bulk-retry"]:not([disabled])').waitFor();
    expect((await app.client.getRun(more)).state).toBe('failed');
    await expectNothingInjected(page);
    await page.close();
  });

  it('clients: each client running now, with its queues and slots in use', async () => {
    const page = await open('/cyclone/clients', 'table.clients');
    const row = page.locator(`tr[data-client="${clientIdOf(app)}"]`);
    await expect(row.locator('.client-queue[data-queue="default"]').getAttribute('data-slots')).resolves.toBe('4');
    expect(await row.locator('.client-queue a').allTextContents()).toEqual(expect.arrayContaining(['default', XSS.queue]));
    await expect(page.locator(`tr[data-client="${clientIdOf(readOnly)}"] .client-queues`).textContent()).resolves.toBe('enqueue only');
    await expectNothingInjected(page);
    await shoot(page, 'clients');
    await page.close();
  });

  it('a queue’s page: its throughput over the last hour as a chart, and the clients that serve it', async () => {
    const page = await open('/cyclone/queues', 'table.queues');
    await page.click(`tr[data-queue="default"] a.queue-name`);
    await page.waitForURL(/\/cyclone\/queues\/default$/);
    await page.waitForSelector('svg.chart g.minute', { state: 'attached' });
    expect(await page.locator('svg.chart g.minute').count()).toBe(60);
    const finished = await page.locator('svg.chart g.minute').evaluateAll((bars) =>
      bars.reduce((n, bar) => n + Number(bar.getAttribute('data-completed')), 0),
    );
    expect(finished).toBeGreaterThan(0);
    expect(await page.locator(`table.queue-clients tr[data-client="${clientIdOf(app)}"]`).count()).toBe(1);
    await expectNothingInjected(page);
    await shoot(page, 'queue');

    // The hostile queue's name is its page's title, as text.
    await page.goto(`${app.origin}/cyclone/queues/${encodeURIComponent(XSS.queue)}`);
    await page.waitForSelector('svg.chart');
    await expect(page.locator('.queue-title').textContent()).resolves.toBe(XSS.queue);
    await expectNothingInjected(page);
    await page.close();
  });

  it('without credentials the guard answers 401 and no page is drawn', async () => {
    const stranger = await browser.newContext();
    try {
      // The browser gets the guard's Basic challenge, has nothing to answer it with, and draws nothing.
      const page = await stranger.newPage();
      await expect(page.goto(`${app.origin}/cyclone/runs/${flowRun}`)).rejects.toThrow(/ERR_INVALID_AUTH_CREDENTIALS/);
      expect(await page.locator('svg.dag, table').count()).toBe(0);
      for (const path of ['/cyclone', `/cyclone/runs/${flowRun}`, '/cyclone/assets/main.js', '/cyclone/api/runs']) {
        const response = await stranger.request.get(`${app.origin}${path}`);
        expect([path, response.status()]).toEqual([path, 401]);
      }
    } finally {
      await stranger.close();
    }
  });

  it('read-only: the pages show no actions, and the server has no action to post to', async () => {
    const page = await open(`/cyclone/runs/${flowRun}`, 'svg.dag', context, readOnly.origin);
    await expect(page.locator('.badge.read-only').textContent()).resolves.toBe('read-only');
    expect(await page.locator('button[data-action]').count()).toBe(0);
    const status = await page.evaluate(
      async (runId) => (await fetch(`/cyclone/api/runs/${runId}/cancel`, { method: 'POST', headers: { 'x-cyclone-csrf': 'x' } })).status,
      flowRun,
    );
    expect(status).toBe(404);
    expect((await app.client.getRun(flowRun)).state).toBe('running');
    await page.goto(`${readOnly.origin}/cyclone/queues`);
    await page.waitForSelector('table.queues');
    expect(await page.locator('button[data-action]').count()).toBe(0);
    await page.goto(`${readOnly.origin}/cyclone/runs`);
    await page.waitForSelector('table.runs');
    expect(await page.locator('button[data-action]').count()).toBe(0);
    await shoot(page, 'read-only');
    await page.close();
  });
});
