import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import {
  CycloneDatabase,
  DashboardUnguardedError,
  InvalidOptionError,
  PermanentError,
  Step,
  type StepContext,
} from 'cyclone-nestjs';
import { CycloneDashboardModule } from 'cyclone-nestjs/dashboard';
import { uuid7 } from '../libs/cyclone/src/common/uuid7.js';
import { DashboardApp, TestBasicAuthGuard } from './support/dashboard-app.js';
import { CapturingLogger } from './support/nest-app-harness.js';
import { expectCycloneError } from './support/e2e-helpers.js';
import { HandlerProbe } from './support/handler-probe.js';
import { sql } from './support/sql.js';
import { waitFor } from './support/wait.js';

const probe = new HandlerProbe();

@Injectable()
class DashboardSteps {
  @Step('dash_ok')
  async ok(input: unknown) {
    return { echoed: input };
  }

  /** Fails for good on its first attempt; a retry (one more attempt) succeeds. */
  @Step('dash_fail_once')
  async failOnce(_input: unknown, ctx: StepContext) {
    if (ctx.attempt === 1) throw new PermanentError('first attempt fails for good');
    return 'second attempt';
  }

  @Step('dash_hold')
  async hold(_input: unknown, ctx: StepContext) {
    return probe.cooperate(ctx);
  }

  @Step('dash_seed')
  async seed() {
    return null;
  }
}

/** Only the default queue is served: jobs on other queues stay where the test puts them. */
const cyclone = {
  queues: { default: { workers: 4 } },
  leaseTtl: '600ms',
  schedules: [{ name: 'nightly', cron: '0 3 * * *', kind: 'dash_seed', timezone: 'Europe/Paris' }],
};

describe('CycloneDashboardModule.forRoot', () => {
  it('refuses to mount without a guard unless allowUnauthenticated is true', async () => {
    const err = await expectCycloneError(async () => CycloneDashboardModule.forRoot(), DashboardUnguardedError, 'dashboard_unguarded');
    expect(err.message).toContain('/cyclone has no guard');
    expect(err.message).toContain('allowUnauthenticated: true');
    await expectCycloneError(async () => CycloneDashboardModule.forRoot({ path: '/ops', readOnly: true }), DashboardUnguardedError, 'dashboard_unguarded');
    expect(CycloneDashboardModule.forRoot({ allowUnauthenticated: true }).controllers).toHaveLength(3);
    expect(CycloneDashboardModule.forRoot({ guard: TestBasicAuthGuard, readOnly: true }).controllers).toHaveLength(2);
  });

  it.each([
    [{ guard: TestBasicAuthGuard, path: 'cyclone' }, 'Option "path"'],
    [{ guard: TestBasicAuthGuard, path: '/a b' }, 'Option "path"'],
    [{ guard: TestBasicAuthGuard, path: '//evil.example' }, 'Option "path"'],
    [{ guard: 'yes' }, 'Option "guard"'],
    [{ guard: TestBasicAuthGuard, readOnly: 'no' }, 'Option "readOnly"'],
    [{ guard: TestBasicAuthGuard, mount: '/x' }, 'Unknown option "mount"'],
  ])('rejects %j with a typed error naming the option', async (options, message) => {
    const err = await expectCycloneError(async () => CycloneDashboardModule.forRoot(options as any), InvalidOptionError, 'invalid_option');
    expect(err.message).toContain(message);
  });
});

describe('the dashboard API', () => {
  let app: DashboardApp;
  let readOnly: DashboardApp;
  const readOnlyLog = new CapturingLogger();

  beforeAll(async () => {
    app = await DashboardApp.start({ providers: [DashboardSteps], cyclone });
    // A second client on the same database, with a read-only dashboard and no workers.
    readOnly = await DashboardApp.start({
      databaseUrl: app.databaseUrl,
      cyclone: { runWorkers: false },
      dashboard: { guard: TestBasicAuthGuard, readOnly: true },
      logger: readOnlyLog,
    });
  });
  afterAll(async () => {
    probe.releaseAll();
    await readOnly?.close();
    await app?.close();
  });

  describe('the guard', () => {
    it.each([
      ['GET', '/cyclone'],
      ['GET', '/cyclone/runs/0190b3a0-0000-7000-8000-000000000000'],
      ['GET', '/cyclone/assets/main.js'],
      ['GET', '/cyclone/api/queues'],
      ['GET', '/cyclone/api/runs'],
      ['POST', '/cyclone/api/queues/default/pause'],
    ])('%s %s without credentials is refused before anything runs', async (method, path) => {
      const response = await app.request(path, { method, auth: false });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Basic realm="Cyclone"');
      expect(await app.client.pausedQueues()).toEqual([]);
    });

    it('lets the credentials through', async () => {
      expect((await app.request('/cyclone')).status).toBe(200);
      expect((await app.request('/cyclone/api/queues')).status).toBe(200);
    });
  });

  describe('the page', () => {
    it('is one document with a strict content security policy and a CSRF token in an HttpOnly SameSite cookie', async () => {
      const response = await app.request('/cyclone/runs');
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(response.headers.get('content-security-policy')).toContain("script-src 'self'");
      expect(response.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
      const html = await response.text();
      expect(html).toContain('data-base="/cyclone"');
      expect(html).toMatch(/<script type="module" src="\/cyclone\/assets\/main\.js\?v=[0-9a-f]{12}"><\/script>/);
      const cookie = response.headers.getSetCookie().find((c) => c.startsWith('cyclone_csrf='))!;
      expect(cookie).toMatch(/^cyclone_csrf=[A-Za-z0-9_-]{43}; Path=\/cyclone; HttpOnly; SameSite=Strict$/);
      expect(html).toContain(`data-csrf-token="${cookie.split(';')[0].split('=')[1]}"`);
      // Another page load keeps the browser's token, so every open tab keeps working.
      const again = await app.request('/cyclone/queues', { headers: { cookie: cookie.split(';')[0] } });
      expect(await again.text()).toContain(`data-csrf-token="${cookie.split(';')[0].split('=')[1]}"`);
    });

    it('serves only its own assets, by name', async () => {
      const main = await app.request('/cyclone/assets/main.js');
      expect(main.status).toBe(200);
      expect(main.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
      expect(await main.text()).toContain("from './page-queues.js'");
      expect((await app.request('/cyclone/assets/dashboard.css')).headers.get('content-type')).toBe('text/css; charset=utf-8');
      for (const path of ['/cyclone/assets/nope.js', '/cyclone/assets/..%2F..%2Fpackage.json', '/cyclone/assets/%2e%2e%2fcsrf.js']) {
        expect((await app.request(path)).status).toBe(404);
      }
    });

    it('is read-only on the read-only dashboard: no token, no cookie', async () => {
      const response = await readOnly.request('/cyclone');
      const html = await response.text();
      expect(html).toContain('data-read-only="true"');
      expect(html).toContain('data-csrf-token=""');
      expect(response.headers.getSetCookie()).toEqual([]);
    });

    it('knows its base below a global prefix', async () => {
      const prefixed = await DashboardApp.start({
        databaseUrl: app.databaseUrl,
        cyclone: { runWorkers: false },
        dashboard: { allowUnauthenticated: true, path: '/ops/jobs' },
        globalPrefix: 'admin',
      });
      try {
        const html = await (await prefixed.request('/admin/ops/jobs/runs/0190b3a0-0000-7000-8000-000000000000')).text();
        expect(html).toContain('data-base="/admin/ops/jobs"');
        expect(html).toContain('src="/admin/ops/jobs/assets/main.js?v=');
        expect((await prefixed.request('/admin/ops/jobs/api/runs', { auth: false })).status).toBe(200);
      } finally {
        await prefixed.close();
      }
    });
  });

  describe('actions', () => {
    async function heldRun(): Promise<string> {
      const runId = await app.client.enqueue('dash_hold', {});
      await probe.call(runId);
      return runId;
    }

    it('cancel, with the page’s token, cancels a running run and reaches its handler', async () => {
      const runId = await heldRun();
      const { status, body } = await app.act(`/cyclone/api/runs/${runId}/cancel`);
      expect(status).toBe(200);
      expect(body).toEqual({ changed: true });
      expect((await app.client.getRun(runId)).state).toBe('cancelled');
      await expect(probe.of(runId)[0].aborted).resolves.toMatchObject({ code: 'step_cancelled' });
      // Cancelling again changes nothing and says so.
      expect((await app.act(`/cyclone/api/runs/${runId}/cancel`)).body).toEqual({ changed: false });
    });

    it.each([
      ['no token', (c: { cookie: string; token: string }) => ({ cookie: c.cookie })],
      ['no cookie', (c: { cookie: string; token: string }) => ({ 'x-cyclone-csrf': c.token })],
      ['a token that is not the cookie’s', (c: { cookie: string; token: string }) => ({ cookie: c.cookie, 'x-cyclone-csrf': 'A'.repeat(43) })],
      ['a request from another site', (c: { cookie: string; token: string }) => ({ cookie: c.cookie, 'x-cyclone-csrf': c.token, 'sec-fetch-site': 'cross-site' })],
      ['an Origin of another host', (c: { cookie: string; token: string }) => ({ cookie: c.cookie, 'x-cyclone-csrf': c.token, origin: 'https://evil.example' })],
    ])('refuses an action with %s (403 csrf_rejected) and changes nothing', async (_what, headers) => {
      const runId = await heldRun();
      const csrf = await app.csrf();
      const response = await app.request(`/cyclone/api/runs/${runId}/cancel`, { method: 'POST', headers: headers(csrf) as Record<string, string> });
      expect(response.status).toBe(403);
      expect(await response.json()).toMatchObject({ statusCode: 403, code: 'csrf_rejected' });
      expect((await app.client.getRun(runId)).state).toBe('running');
      probe.of(runId)[0].release('done');
      await waitFor('the held run to finish', async () => (await app.client.getRun(runId)).state === 'completed');
    });

    it('a GET to an action route does nothing', async () => {
      const runId = await heldRun();
      expect((await app.request(`/cyclone/api/runs/${runId}/cancel`)).status).toBe(404);
      expect((await app.client.getRun(runId)).state).toBe('running');
      await app.act(`/cyclone/api/runs/${runId}/cancel`);
    });

    it('retry reopens a failed run’s node, which then completes; retry all reports how many nodes it reopened', async () => {
      const failed = await app.client.enqueue('dash_fail_once', {});
      await waitFor('the run to fail', async () => (await app.client.getRun(failed)).state === 'failed');
      expect(await app.act(`/cyclone/api/runs/${failed}/nodes/dash_fail_once/retry`)).toEqual({
        status: 200,
        body: { changed: true, reopened: 1 },
      });
      await expect(app.client.result(failed, { timeout: 10_000 })).resolves.toBe('second attempt');
      // Nothing left to retry: a completed node is refused with its state.
      const again = await app.act(`/cyclone/api/runs/${failed}/nodes/dash_fail_once/retry`);
      expect(again).toMatchObject({ status: 409, body: { code: 'invalid_state' } });
      expect((await app.act(`/cyclone/api/runs/${failed}/retry`)).body).toEqual({ changed: false, reopened: 0 });

      const other = await app.client.enqueue('dash_fail_once', {});
      await waitFor('the other run to fail', async () => (await app.client.getRun(other)).state === 'failed');
      expect((await app.act(`/cyclone/api/runs/${other}/retry`)).body).toEqual({ changed: true, reopened: 1 });
      await expect(app.client.result(other, { timeout: 10_000 })).resolves.toBe('second attempt');
    });

    it('pause and resume a run, and a queue on every client', async () => {
      const runId = await app.client.enqueue('dash_seed', null, { queue: 'unserved_actions' });
      expect((await app.act(`/cyclone/api/runs/${runId}/pause`)).body).toEqual({ changed: true });
      expect((await app.client.getRun(runId)).state).toBe('paused');
      expect((await app.act(`/cyclone/api/runs/${runId}/pause`)).body).toEqual({ changed: false });
      expect((await app.act(`/cyclone/api/runs/${runId}/resume`)).body).toEqual({ changed: true });
      expect((await app.client.getRun(runId)).state).toBe('running');

      expect((await app.act('/cyclone/api/queues/unserved_actions/pause')).body).toEqual({ changed: true });
      expect(await readOnly.client.pausedQueues()).toEqual(['unserved_actions']);
      expect((await app.act('/cyclone/api/queues/unserved_actions/resume')).body).toEqual({ changed: true });
      expect(await app.client.pausedQueues()).toEqual([]);
      await app.client.cancel(runId);
    });

    it('refuse to pause or resume a queue that does not exist with a 404 that names it, and pause nothing', async () => {
      const csrf = await app.csrf();
      for (const action of ['pause', 'resume']) {
        const { status, body } = await app.act(`/cyclone/api/queues/no_such_queue/${action}`, csrf);
        expect(status).toBe(404);
        expect(body).toMatchObject({ statusCode: 404, code: 'queue_not_found' });
        expect(body.message).toContain('Queue "no_such_queue" does not exist');
      }
      expect(await app.client.pausedQueues()).toEqual([]);
      const { body } = await app.json('/cyclone/api/queues');
      expect(body.queues.map((q: { name: string }) => q.name)).not.toContain('no_such_queue');
      // A queue this client serves exists before it holds any run; so does one another client's step names.
      expect((await app.act('/cyclone/api/queues/default/pause', csrf)).body).toEqual({ changed: true });
      expect((await app.act('/cyclone/api/queues/default/resume', csrf)).body).toEqual({ changed: true });
    });

    it('are not routes at all on a read-only dashboard', async () => {
      const runId = await heldRun();
      for (const path of [`/api/runs/${runId}/cancel`, `/api/runs/${runId}/pause`, `/api/runs/${runId}/retry`, '/api/queues/default/pause']) {
        const response = await readOnly.request(`/cyclone${path}`, {
          method: 'POST',
          headers: { 'x-cyclone-csrf': 'A'.repeat(43), cookie: `cyclone_csrf=${'A'.repeat(43)}` },
        });
        expect(response.status).toBe(404);
      }
      expect((await app.client.getRun(runId)).state).toBe('running');
      expect(await app.client.pausedQueues()).toEqual([]);
      await app.act(`/cyclone/api/runs/${runId}/cancel`);
    });

    it('answer a run or node that does not exist with 404, a malformed one with 400', async () => {
      const csrf = await app.csrf();
      const missing = uuid7();
      expect(await app.act(`/cyclone/api/runs/${missing}/cancel`, csrf)).toMatchObject({ status: 404, body: { code: 'run_not_found' } });
      const runId = await app.client.enqueue('dash_seed', null, { queue: 'unserved_actions' });
      expect(await app.act(`/cyclone/api/runs/${runId}/nodes/nope/retry`, csrf)).toMatchObject({ status: 404, body: { code: 'step_not_found' } });
      expect(await app.act('/cyclone/api/runs/not-a-run/cancel', csrf)).toMatchObject({
        status: 400,
        body: { code: 'invalid_parameter', parameter: 'runId' },
      });
      expect(await app.act(`/cyclone/api/queues/${'q'.repeat(201)}/pause`, csrf)).toMatchObject({
        status: 400,
        body: { code: 'invalid_parameter', parameter: 'queue' },
      });
      expect(await app.act('/cyclone/api/queues/a%00b/pause', csrf)).toMatchObject({
        status: 400,
        body: { code: 'invalid_parameter', parameter: 'queue' },
      });
      expect(await app.act(`/cyclone/api/runs/${runId}/nodes/a%00b/retry`, csrf)).toMatchObject({
        status: 400,
        body: { code: 'invalid_parameter', parameter: 'nodeId' },
      });
      expect(await app.act(`/cyclone/api/runs/${runId}/cancel?force=1`, csrf)).toMatchObject({
        status: 400,
        body: { code: 'invalid_parameter', parameter: 'force' },
      });
      expect((await app.client.getRun(runId)).state).toBe('running');
      await app.client.cancel(runId);
    });
  });

  describe('runs', () => {
    /** Runs inserted with ids made at chosen times, so time filters have exact answers. */
    const seeded: { id: string; kind: string; queue: string; state: string; uniqueKey: string | null; at: number }[] = [];
    /** Three hours ago, to the minute: no other run of the file was made then. */
    const t0 = Math.floor((Date.now() - 3 * 3_600_000) / 60_000) * 60_000;

    beforeAll(async () => {
      for (let i = 0; i < 12; i++) {
        seeded.push({
          id: uuid7(t0 + i * 60_000),
          kind: i % 3 === 0 ? 'listed_b' : 'listed_a',
          queue: i % 2 === 0 ? 'listed_even' : 'listed_odd',
          state: i % 4 === 1 ? 'failed' : i % 4 === 2 ? 'running' : 'completed',
          uniqueKey: i === 5 ? 'report:7:2026-01' : null,
          at: t0 + i * 60_000,
        });
      }
      await sql(
        app.databaseUrl,
        `INSERT INTO cyclone_runs (id, kind, state, queue, unique_key, retention, created_at, updated_at, finished_at)
         SELECT id, kind, state, queue, unique_key, interval '30 days', at, at, CASE WHEN state <> 'running' THEN at END
           FROM jsonb_to_recordset($1::jsonb) AS r(id uuid, kind text, state text, queue text, unique_key text, at timestamptz)`,
        [JSON.stringify(seeded.map((r) => ({ ...r, unique_key: r.uniqueKey, at: new Date(r.at).toISOString() })))],
      );
    });

    /** The seeded runs the API lists for these filters, by id. */
    async function listed(query: string): Promise<{ ids: string[]; older: string | null; newer: string | null }> {
      const { status, body } = await app.json(`/cyclone/api/runs?${query}`);
      expect(status).toBe(200);
      return { ids: body.runs.map((r: { id: string }) => r.id), older: body.older, newer: body.newer };
    }
    const newestFirst = (rows: typeof seeded) => rows.map((r) => r.id).reverse();
    const inWindow = `from=${new Date(t0).toISOString()}&to=${new Date(t0 + 11 * 60_000).toISOString()}`;

    it('lists runs newest first with what the table shows', async () => {
      const { body } = await app.json(`/cyclone/api/runs?${inWindow}&limit=1`);
      const last = seeded[11];
      expect(body.runs).toEqual([
        {
          id: last.id,
          name: last.kind,
          type: 'job',
          state: last.state,
          queue: last.queue,
          uniqueKey: null,
          createdAt: new Date(last.at).toISOString(),
          updatedAt: new Date(last.at).toISOString(),
          finishedAt: new Date(last.at).toISOString(),
          dueAt: null,
        },
      ]);
    });

    it.each([
      ['state=failed', (r: (typeof seeded)[0]) => r.state === 'failed'],
      ['state=completed', (r: (typeof seeded)[0]) => r.state === 'completed'],
      ['kind=listed_b', (r: (typeof seeded)[0]) => r.kind === 'listed_b'],
      ['queue=listed_odd', (r: (typeof seeded)[0]) => r.queue === 'listed_odd'],
      ['queue=listed_even&kind=listed_a&state=running', (r: (typeof seeded)[0]) => r.queue === 'listed_even' && r.kind === 'listed_a' && r.state === 'running'],
    ])('filters by %s', async (filter, keep) => {
      expect((await listed(`${filter}&${inWindow}`)).ids).toEqual(newestFirst(seeded.filter(keep)));
    });

    it('filters by creation time to the millisecond, both ends included', async () => {
      const from = new Date(seeded[3].at).toISOString();
      const to = new Date(seeded[7].at).toISOString();
      expect((await listed(`from=${from}&to=${to}`)).ids).toEqual(newestFirst(seeded.slice(3, 8)));
      const justAfter = new Date(seeded[3].at + 1).toISOString();
      const justBefore = new Date(seeded[7].at - 1).toISOString();
      expect((await listed(`from=${justAfter}&to=${justBefore}`)).ids).toEqual(newestFirst(seeded.slice(4, 7)));
    });

    it('finds a run by id, and by unique key even once it finished', async () => {
      expect((await listed(`q=${seeded[4].id}`)).ids).toEqual([seeded[4].id]);
      expect((await listed(`q=${seeded[4].id.toUpperCase()}`)).ids).toEqual([seeded[4].id]);
      expect((await listed('q=report:7:2026-01')).ids).toEqual([seeded[5].id]);
      expect((await listed('q=report:7')).ids).toEqual([]);
      // Values reach the database as parameters, never as SQL.
      expect((await listed(`kind=${encodeURIComponent("listed_a' OR '1'='1")}`)).ids).toEqual([]);
    });

    it('pages by key, older and back newer, with no run twice or missing', async () => {
      const pages: string[][] = [];
      let cursor: string | null = null;
      let page: Awaited<ReturnType<typeof listed>>;
      do {
        page = await listed(`${inWindow}&limit=5${cursor ? `&before=${cursor}` : ''}`);
        pages.push(page.ids);
        expect(page.newer).toBe(cursor === null ? null : page.ids[0]);
        cursor = page.older;
      } while (cursor !== null);
      expect(pages.map((p) => p.length)).toEqual([5, 5, 2]);
      expect(pages.flat()).toEqual(newestFirst(seeded));
      // Back from the last page: the page newer than it is the middle one, then the first.
      const middle = await listed(`${inWindow}&limit=5&after=${pages[2][0]}`);
      expect(middle.ids).toEqual(pages[1]);
      expect(middle.older).toBe(pages[1][4]);
      const first = await listed(`${inWindow}&limit=5&after=${middle.ids[0]}`);
      expect(first.ids).toEqual(pages[0]);
      expect(first.newer).toBeNull();
    });

    it.each([
      { label: 'state=bogus', query: 'state=bogus', parameter: 'state', message: 'must be one of running, paused, completed, failed, cancelled' },
      { label: 'state=failed&state=running', query: 'state=failed&state=running', parameter: 'state', message: 'given more than once' },
      { label: 'limit=0', query: 'limit=0', parameter: 'limit', message: 'from 1 to 200' },
      { label: 'limit=201', query: 'limit=201', parameter: 'limit', message: 'from 1 to 200' },
      { label: 'limit=ten', query: 'limit=ten', parameter: 'limit', message: 'from 1 to 200' },
      { label: 'limit=1e2', query: 'limit=1e2', parameter: 'limit', message: 'from 1 to 200' },
      { label: 'from=yesterday', query: 'from=yesterday', parameter: 'from', message: 'ISO 8601' },
      { label: 'to=2026-02-30T25:00:00Z', query: 'to=2026-02-30T25:00:00Z', parameter: 'to', message: 'ISO 8601' },
      { label: 'from=2026-02-01&to=2026-01-01', query: 'from=2026-02-01&to=2026-01-01', parameter: 'from', message: 'not be later than "to"' },
      { label: 'before=0190', query: 'before=0190', parameter: 'before', message: 'a run id' },
      { label: 'before=<id>&after=<id>', query: `before=${uuid7()}&after=${uuid7()}`, parameter: 'after', message: 'cannot be combined' },
      { label: 'kind=<201 characters>', query: `kind=${'k'.repeat(201)}`, parameter: 'kind', message: 'at most 200 characters' },
      { label: 'q=<201 characters>', query: `q=${'k'.repeat(201)}`, parameter: 'q', message: 'at most 200 characters' },
      { label: 'queue=%20', query: 'queue=%20', parameter: 'queue', message: 'non-empty' },
      { label: 'q=%00', query: 'q=%00', parameter: 'q', message: 'a NUL character' },
      { label: 'kind=a%00b', query: 'kind=a%00b', parameter: 'kind', message: 'a NUL character' },
      { label: 'queue=%00', query: 'queue=%00', parameter: 'queue', message: 'a NUL character' },
      { label: 'offset=50', query: 'offset=50', parameter: 'offset', message: 'Known parameters: state, kind, queue, from, to, q, before, after, limit' },
      { label: 'kind[a]=b', query: 'kind[a]=b', parameter: 'kind[a]', message: 'Unknown parameter' },
    ])('answers runs?$label with a 400 naming the parameter', async ({ query, parameter, message }) => {
      const { status, body } = await app.json(`/cyclone/api/runs?${query}`);
      expect(status).toBe(400);
      expect(body).toMatchObject({ statusCode: 400, code: 'invalid_parameter', parameter });
      expect(body.message).toContain(message);
    });

    it.each([
      ['/cyclone/api/runs/not-a-uuid', 'runId'],
      [`/cyclone/api/runs/${uuid7()}?verbose=1`, 'verbose'],
      ['/cyclone/api/queues?window=60', 'window'],
      ['/cyclone/api/schedules?all=1', 'all'],
    ])('answers %s with a 400 naming the parameter', async (path, parameter) => {
      expect(await app.json(path)).toMatchObject({ status: 400, body: { code: 'invalid_parameter', parameter } });
    });

    it('gives a run delayed by an hour its due time, so it shows as scheduled rather than running; a due or finished run has none', async () => {
      const delayed = await app.client.enqueue('dash_ok', { later: true }, { processIn: '1h', queue: 'unserved_delayed' });
      const due = await app.client.enqueue('dash_ok', { now: true }, { queue: 'unserved_delayed' });
      const [{ scheduledAt }] = await app.client.listSteps(delayed);
      expect(scheduledAt.getTime()).toBeGreaterThan(Date.now() + 59 * 60_000);

      const { body } = await app.json('/cyclone/api/runs?queue=unserved_delayed');
      const listed = new Map(body.runs.map((r: { id: string; state: string; dueAt: string | null }) => [r.id, [r.state, r.dueAt]]));
      expect(listed).toEqual(new Map([[delayed, ['running', scheduledAt.toISOString()]], [due, ['running', null]]]));
      expect((await app.json(`/cyclone/api/runs/${delayed}`)).body.run).toMatchObject({ state: 'running', dueAt: scheduledAt.toISOString() });
      expect((await app.json(`/cyclone/api/runs/${due}`)).body.run).toMatchObject({ state: 'running', dueAt: null });
      await app.client.cancel(delayed);
      await app.client.cancel(due);
      expect((await app.json(`/cyclone/api/runs/${delayed}`)).body.run).toMatchObject({ state: 'cancelled', dueAt: null });
    });

    it('answers an unknown run with 404', async () => {
      expect(await app.json(`/cyclone/api/runs/${uuid7()}`)).toMatchObject({ status: 404, body: { code: 'run_not_found' } });
    });

    it('answers a database error with a 500 that quotes neither SQL nor data, and logs it', async () => {
      // A real error of the server, handed to the dashboard's next query.
      const failure = await sql(readOnly.databaseUrl, "SELECT secret FROM cyclone_missing WHERE note = 'private'").catch((err) => err);
      expect(failure.code).toBe('42P01');
      const database = readOnly.app.get(CycloneDatabase);
      const query = database.query;
      database.query = (async () => {
        throw failure;
      }) as typeof query;
      try {
        const response = await readOnly.request('/cyclone/api/queues');
        expect(response.status).toBe(500);
        const text = await response.text();
        expect(JSON.parse(text)).toEqual({
          statusCode: 500,
          code: 'internal_error',
          message: 'The dashboard could not answer this request; the server log says why.',
        });
        expect(text).not.toMatch(/cyclone_missing|relation|secret/i);
        expect(readOnlyLog.messages.join('\n')).toContain('relation "cyclone_missing" does not exist');
      } finally {
        database.query = query;
      }
    });

    it('says how long the server took in a Server-Timing header', async () => {
      const response = await app.request('/cyclone/api/runs?limit=1');
      expect(response.headers.get('server-timing')).toMatch(/^cyclone;dur=\d+(\.\d)?;desc="dashboard"$/);
    });
  });

  describe('a run', () => {
    it('is the run and its nodes as the client reads them, with each node’s progress', async () => {
      const runId = await app.client.enqueue('dash_ok', { n: 1 }, { unique: 'one-run' });
      await app.client.result(runId, { timeout: 10_000 });
      const { status, body } = await app.json(`/cyclone/api/runs/${runId}`);
      expect(status).toBe(200);
      const run = JSON.parse(JSON.stringify(await app.client.getRun(runId)));
      const steps = JSON.parse(JSON.stringify(await app.client.listSteps(runId)));
      expect(body).toEqual({
        run: { ...run, name: 'dash_ok', type: 'job', dueAt: null, versionHere: null },
        steps: steps.map((s: object) => ({ ...s, progress: null })),
        at: expect.any(String),
      });
      expect(body.steps[0]).toMatchObject({ nodeId: 'dash_ok', state: 'completed', output: { echoed: { n: 1 } }, attempt: 1 });
    });

    it('shows the progress listSteps reports for a step', async () => {
      const runId = await app.client.enqueue('dash_ok', { n: 2 });
      await app.client.result(runId, { timeout: 10_000 });
      const client = app.client as unknown as { listSteps: (id: string) => Promise<object[]> };
      const original = client.listSteps;
      client.listSteps = async (id: string) => (await original.call(app.client, id)).map((s) => ({ ...s, progress: { percent: 40, note: 'rows' } }));
      try {
        const { body } = await app.json(`/cyclone/api/runs/${runId}`);
        expect(body.steps[0].progress).toEqual({ percent: 40, note: 'rows' });
      } finally {
        client.listSteps = original;
      }
    });
  });

  describe('queues', () => {
    it('counts each queue’s available, scheduled, running, failed and paused steps, and whether it is paused', async () => {
      const q = 'counted';
      await app.client.enqueueMany('dash_seed', [1, 2], { queue: q });
      await app.client.enqueue('dash_seed', 3, { queue: q, processIn: '1h' });
      const [failed, paused, running] = await app.client.enqueueMany('dash_seed', [4, 5, 6], { queue: q, processIn: '1h' });
      await sql(app.databaseUrl, `UPDATE cyclone_steps SET state = 'discarded', finished_at = now() - interval '1 hour' WHERE run_id = $1`, [failed]);
      await app.client.pause(paused);
      await sql(
        app.databaseUrl,
        `UPDATE cyclone_steps SET state = 'running', started_at = now(), lease_owner = 'elsewhere', lease_expiry = now() + interval '1 hour'
          WHERE run_id = $1`,
        [running],
      );
      await app.client.pauseQueue(q);
      try {
        const { status, body } = await app.json('/cyclone/api/queues');
        expect(status).toBe(200);
        const queue = body.queues.find((x: { name: string }) => x.name === q);
        expect(queue).toMatchObject({
          name: q,
          available: 2,
          scheduled: 1,
          running: 1,
          failed: 1,
          paused: 1,
          isPaused: true,
          servedHere: false,
          throughput: { completedPerMinute: 0, failedPerMinute: 0 },
        });
        expect(queue.oldestAvailableMs).toBeGreaterThanOrEqual(0);
        expect(body.queues.find((x: { name: string }) => x.name === 'default')).toMatchObject({ servedHere: true, isPaused: false });
        expect(body.throughputWindowSeconds).toBe(300);
      } finally {
        await app.client.resumeQueue(q);
      }
    });

    it('reads throughput from the steps finished in the last five minutes', async () => {
      // Three completed and one discarded within the window, one completed before it.
      await sql(
        app.databaseUrl,
        `WITH runs AS (
           INSERT INTO cyclone_runs (id, kind, state, queue, retention, finished_at)
           SELECT id, 'dash_seed', 'completed', 'measured', interval '1 day', now() FROM unnest($1::uuid[]) AS id
           RETURNING id)
         INSERT INTO cyclone_steps (run_id, node_id, kind, queue, state, max_attempts, finished_at)
         SELECT id, 'dash_seed', 'dash_seed', 'measured', s.state, 1, now() - s.ago
           FROM (SELECT id, row_number() OVER () AS n FROM runs) r
           JOIN (VALUES (1, 'completed', interval '1 minute'), (2, 'completed', interval '2 minutes'),
                        (3, 'completed', interval '4 minutes'), (4, 'discarded', interval '30 seconds'),
                        (5, 'completed', interval '6 minutes')) AS s(n, state, ago) ON s.n = r.n`,
        [Array.from({ length: 5 }, () => uuid7())],
      );
      const { body } = await app.json('/cyclone/api/queues');
      expect(body.queues.find((x: { name: string }) => x.name === 'measured')).toMatchObject({
        available: 0,
        running: 0,
        failed: 1,
        throughput: { completedPerMinute: 0.6, failedPerMinute: 0.2 },
      });
    });

    it('measures a busy queue from its latest thousand finished steps, not the whole window', async () => {
      // The latest 1,000 steps finished 10 ms apart (6,000 a minute); 2,000 before them, 100 ms apart.
      await sql(
        app.databaseUrl,
        `WITH runs AS (
           INSERT INTO cyclone_runs (id, kind, state, queue, retention, finished_at)
           SELECT id, 'dash_seed', 'completed', 'busy', interval '1 day', now() FROM unnest($1::uuid[]) AS id
           RETURNING id)
         INSERT INTO cyclone_steps (run_id, node_id, kind, queue, state, max_attempts, finished_at)
         SELECT id, 'dash_seed', 'dash_seed', 'busy', 'completed', 1,
                now() - CASE WHEN n <= 1000 THEN n * interval '10 milliseconds'
                             ELSE interval '10 seconds' + (n - 1000) * interval '100 milliseconds' END
           FROM (SELECT id, row_number() OVER () AS n FROM runs) r`,
        [Array.from({ length: 3_000 }, () => uuid7())],
      );
      const { body } = await app.json('/cyclone/api/queues');
      const rate = body.queues.find((x: { name: string }) => x.name === 'busy').throughput.completedPerMinute;
      expect(rate).toBeGreaterThan(4_000);
      expect(rate).toBeLessThan(6_100);
    });
  });

  describe('schedules', () => {
    it("are the app's, with the next tick in their time zone and no last tick before the first", async () => {
      const { status, body } = await app.json('/cyclone/api/schedules');
      expect(status).toBe(200);
      expect(body).toEqual({
        schedules: [{ name: 'nightly', kind: 'dash_seed', cron: '0 3 * * *', timezone: 'Europe/Paris', nextTickAt: expect.any(String), lastTickAt: null }],
      });
      const next = new Date(body.schedules[0].nextTickAt);
      const paris = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Paris', hour: '2-digit', minute: '2-digit' });
      expect(paris.format(next)).toBe('03:00');
      expect(next.getTime() - Date.now()).toBeGreaterThan(0);
      expect(next.getTime() - Date.now()).toBeLessThanOrEqual(25 * 3_600_000);
    });

    it('are none on a client that defines none', async () => {
      expect(await readOnly.json('/cyclone/api/schedules')).toEqual({ status: 200, body: { schedules: [] } });
    });
  });
});
