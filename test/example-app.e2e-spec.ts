import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { NestFactory } from '@nestjs/core';
import type { INestApplication } from '@nestjs/common';
import { CycloneClient, CycloneDatabase, CycloneStats } from 'cyclone-nestjs';
import { TestDatabase } from 'cyclone-nestjs/testing';
import { AppModule } from '../src/app.module.js';
import { dashboardCredentials } from '../src/dashboard/dashboard-credentials.js';
import { serveWorkerEndpoints } from '../src/metrics/worker-endpoints.js';
import { parseExposition } from './support/prometheus.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { waitFor } from './support/wait.js';

/** The dashboard's login, given as a deployment gives it. */
const DASHBOARD = { DASHBOARD_USER: 'ops', DASHBOARD_PASSWORD: 'a-login-of-this-test' };
const authorization = `Basic ${Buffer.from(`${DASHBOARD.DASHBOARD_USER}:${DASHBOARD.DASHBOARD_PASSWORD}`).toString('base64')}`;

/**
 * The example app as deployed: real HTTP, CYCLONE_DATABASE_URL pointing at a
 * fresh database, through a TCP proxy so that a test can take the database
 * away.
 */
describe('example app', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let app: INestApplication;
  let base: string;
  const savedEnv = { ...process.env };

  /** The app on this file's database, started as main.ts starts it, with the environment it is given. */
  async function startApp(env: Record<string, string> = {}): Promise<{ app: INestApplication; base: string }> {
    process.env = {
      ...savedEnv,
      ...DASHBOARD,
      CYCLONE_DATABASE_URL: proxy.urlFor(new URL(database.url).pathname.slice(1)),
      // Heartbeats every second: a cancelled export hears of it within one.
      CYCLONE_LEASE_TTL: '3s',
      ...env,
    };
    const started = await NestFactory.create(AppModule.register(), { logger: ['error'] });
    await started.listen(0, '127.0.0.1');
    return { app: started, base: (await started.getUrl()).replace('[::1]', '127.0.0.1') };
  }

  beforeAll(async () => {
    database = await TestDatabase.create(process.env.CYCLONE_TEST_DATABASE_URL!);
    proxy = await TcpProxy.start(database.url);
    ({ app, base } = await startApp());
  });

  afterAll(async () => {
    await proxy?.up();
    await app?.close();
    await proxy?.close();
    await database?.drop();
    process.env = savedEnv;
  });

  const post = (path: string, body: unknown) =>
    fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  async function emailRunsTo(to: string): Promise<{ id: string; state: string }[]> {
    return app
      .get(CycloneDatabase)
      .dataSource.query(`SELECT id, state FROM cyclone_runs WHERE kind = 'send_email' AND input->>'to' = $1`, [to]);
  }

  it('serves GET /health from real queries', async () => {
    const response = await fetch(`${base}/health`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as any;
    expect(body.status).toBe('ok');
    expect(body.info.cyclone).toMatchObject({ status: 'up', database: 'up', listener: 'connected' });
  });

  it('serves the dashboard at /cyclone behind HTTP Basic, with the login of DASHBOARD_USER and DASHBOARD_PASSWORD', async () => {
    const refused = await fetch(`${base}/cyclone`);
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toContain('Basic');
    // The login of old, admin / cyclone, is no default any more.
    for (const login of ['admin:cyclone', 'ops:wrong']) {
      const headers = { authorization: `Basic ${Buffer.from(login).toString('base64')}` };
      expect((await fetch(`${base}/cyclone/api/queues`, { headers })).status).toBe(401);
    }
    const page = await fetch(`${base}/cyclone`, { headers: { authorization } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('data-base="/cyclone"');
    const queues = (await (await fetch(`${base}/cyclone/api/queues`, { headers: { authorization } })).json()) as any;
    expect(queues.queues.map((q: { name: string }) => q.name)).toEqual(expect.arrayContaining(['default', 'reports', 'exports']));
  });

  describe('the dashboard login and its read-only switch', () => {
    it('has no default: in production the app does not start without one; elsewhere one is made for the run and logged', () => {
      expect(() => dashboardCredentials({ NODE_ENV: 'production' })).toThrow('Set both DASHBOARD_USER and DASHBOARD_PASSWORD');
      expect(() => dashboardCredentials({ DASHBOARD_USER: 'ops' })).toThrow('Set both DASHBOARD_USER and DASHBOARD_PASSWORD');
      expect(dashboardCredentials({ NODE_ENV: 'production', ...DASHBOARD })).toEqual({ user: 'ops', password: 'a-login-of-this-test' });
      const made = [dashboardCredentials({}), dashboardCredentials({})];
      expect(made.map((c) => c.user)).toEqual(['admin', 'admin']);
      expect(made[0].password).toMatch(/^[\w-]{16}$/);
      expect(made[1].password).not.toBe(made[0].password);
    });

    it('refuses to start in production without the login, saying which variables to set', async () => {
      const saved = process.env;
      process.env = { ...saved, NODE_ENV: 'production', DASHBOARD_USER: '', DASHBOARD_PASSWORD: '' };
      try {
        expect(() => AppModule.register()).toThrow('Set both DASHBOARD_USER and DASHBOARD_PASSWORD');
      } finally {
        process.env = saved;
      }
    });

    it('with DASHBOARD_READONLY=true shows everything and has no action to post to', async () => {
      const readOnly = await startApp({ DASHBOARD_READONLY: 'true', CYCLONE_ROLE: 'api' });
      try {
        const headers = { authorization };
        expect((await fetch(`${readOnly.base}/cyclone/api/queues`, { headers })).status).toBe(200);
        const page = await (await fetch(`${readOnly.base}/cyclone`, { headers })).text();
        expect(page).toContain('data-read-only="true"');
        const pause = await fetch(`${readOnly.base}/cyclone/api/queues/default/pause`, { method: 'POST', headers });
        expect(pause.status).toBe(404);
        expect(await app.get(CycloneClient).pausedQueues()).toEqual([]);
      } finally {
        await readOnly.app.close();
      }
      expect(() => {
        process.env = { ...savedEnv, ...DASHBOARD, DASHBOARD_READONLY: 'yes' };
        AppModule.register();
      }).toThrow('DASHBOARD_READONLY must be true or false');
    });
  });

  it('serves GET /metrics for Prometheus: counters of the jobs it ran, gauges of its queues', async () => {
    const scrape = async () => {
      const response = await fetch(`${base}/metrics`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toContain('text/plain; version=0.0.4');
      return parseExposition(await response.text());
    };
    const built = { queue: 'reports', kind: 'build_report' };
    const emails = { queue: 'default', kind: 'send_email' };
    const before = await scrape();
    const count = (s: Awaited<ReturnType<typeof scrape>>, name: string, labels: Record<string, string>) => s.value(name, labels) ?? 0;

    const response = await post('/reports', { userId: 21, email: 'flo@example.com', period: '2026-08' });
    const { runId } = (await response.json()) as { runId: string };
    await fetch(`${base}/reports/${runId}/result`);
    const [email] = await emailRunsTo('flo@example.com');
    await app.get(CycloneClient).result(email.id, { timeout: 10_000 });

    const after = await waitFor('the email to be counted', async () => {
      const s = await scrape();
      return count(s, 'cyclone_steps_finished_total', { ...emails, outcome: 'completed' }) >
        count(before, 'cyclone_steps_finished_total', { ...emails, outcome: 'completed' })
        ? s
        : undefined;
    });
    const delta = (name: string, labels: Record<string, string>) => count(after, name, labels) - count(before, name, labels);
    // One report enqueued over HTTP, which enqueued one email; both ran here once.
    expect(delta('cyclone_jobs_enqueued_total', built)).toBe(1);
    expect(delta('cyclone_jobs_enqueued_total', emails)).toBe(1);
    expect(delta('cyclone_steps_finished_total', { ...built, outcome: 'completed' })).toBe(1);
    expect(delta('cyclone_steps_finished_total', { ...emails, outcome: 'completed' })).toBe(1);
    expect(delta('cyclone_step_duration_seconds_count', built)).toBe(1);
    // The report takes 30 × 5 ms at least.
    expect(delta('cyclone_step_duration_seconds_sum', built)).toBeGreaterThanOrEqual(0.15);
    // The queue gauges cover every queue this app serves.
    for (const queue of ['default', 'reports']) {
      expect(after.value('cyclone_queue_steps', { queue, state: 'running' })).toBeDefined();
    }
    expect(after.value('cyclone_leases_stranded')).toBe(0);
    expect(after.series('cyclone_loop_last_tick_age_seconds').map((s) => s.labels.loop)).toContain('cyclone:metrics');
    // The report's last progress is shown with its step.
    const status = (await (await fetch(`${base}/reports/${runId}`)).json()) as any;
    expect(status.steps[0].progress).toMatchObject({ days: 30 });
  });

  it('builds a report through the API and then emails it', async () => {
    const response = await post('/reports', { userId: 7, email: 'ada@example.com', period: '2026-11' });
    expect(response.status).toBe(202);
    const { runId } = (await response.json()) as { runId: string };
    const result = (await (await fetch(`${base}/reports/${runId}/result`)).json()) as any;
    expect(result).toMatchObject({ userId: 7, period: '2026-11' });
    expect(result.orders).toBeGreaterThan(0);
    const [email] = await emailRunsTo('ada@example.com');
    await expect(app.get(CycloneClient).result(email.id, { timeout: 10_000 })).resolves.toBeNull();
  });

  it('refuses a second report for the same user and period while the first is queued', async () => {
    const input = { userId: 8, email: 'bob@example.com', period: '2026-10' };
    const first = await post('/reports', input);
    const second = await post('/reports', input);
    expect(first.status).toBe(202);
    expect(second.status).toBe(409);
    const body = (await second.json()) as any;
    expect(body).toMatchObject({ code: 'duplicate', runId: ((await first.json()) as any).runId });
  });

  it('signs a user up and queues the welcome email in the same transaction', async () => {
    const first = await post('/users', { email: 'cy@example.com' });
    expect(first.status).toBe(201);
    const user = (await first.json()) as any;
    await expect(app.get(CycloneClient).result(user.welcomeRunId, { timeout: 10_000 })).resolves.toBeNull();

    // The same address again: the insert fails, so no second email is queued.
    const again = await post('/users', { email: 'cy@example.com' });
    expect(again.status).toBe(409);
    expect(await emailRunsTo('cy@example.com')).toHaveLength(1);
  });

  it("creates its own tables with its TypeORM migrations (migrations/) at start, beside Cyclone's; a second start applies nothing", async () => {
    const dataSource = app.get(CycloneDatabase).dataSource;
    const applied = async () => (await dataSource.query('SELECT name FROM app_migrations ORDER BY id')) as { name: string }[];
    expect(await applied()).toEqual([{ name: 'UsersAndOrders1765800000000' }]);
    const tables = (await dataSource.query(
      `SELECT tablename FROM pg_tables WHERE tablename IN ('users', 'orders', 'cyclone_runs') ORDER BY 1`,
    )) as { tablename: string }[];
    expect(tables.map((t) => t.tablename)).toEqual(['cyclone_runs', 'orders', 'users']);
    const replica = await startApp({ CYCLONE_ROLE: 'api' });
    await replica.app.close();
    expect(await applied()).toEqual([{ name: 'UsersAndOrders1765800000000' }]);
  });

  it("takes an order of a signed-up user and confirms it by email, queued in the order's transaction; an unknown user is a 404 that writes nothing", async () => {
    const client = app.get(CycloneClient);
    const user = (await (await post('/users', { email: 'orderer@example.com' })).json()) as { id: number };
    const placed = await post('/orders', { userId: user.id, totalCents: 1999 });
    expect(placed.status).toBe(201);
    const order = (await placed.json()) as { id: number; userId: number; totalCents: number; confirmRunId: string };
    expect(order).toMatchObject({ userId: user.id, totalCents: 1999 });
    const { emailRunId } = (await client.result(order.confirmRunId, { timeout: 10_000 })) as { emailRunId: string };
    await expect(client.result(emailRunId, { timeout: 10_000 })).resolves.toBeNull();
    expect((await client.getRun(emailRunId)).input).toMatchObject({ to: 'orderer@example.com', subject: `Order #${order.id}` });

    const runsBefore = (await app.get(CycloneDatabase).dataSource.query('SELECT count(*)::int AS n FROM cyclone_runs'))[0].n;
    const missing = await post('/orders', { userId: 999_999, totalCents: 5 });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { message: string }).message).toContain('User 999999 does not exist');
    const [{ orders, runs }] = await app
      .get(CycloneDatabase)
      .dataSource.query('SELECT (SELECT count(*) FROM orders WHERE user_id = 999999)::int AS orders, (SELECT count(*) FROM cyclone_runs)::int AS runs');
    expect({ orders, runs }).toEqual({ orders: 0, runs: runsBefore });
  });

  it('keeps one durable schedule, the daily orders summary, listed with its next tick', async () => {
    const schedules = await app.get(CycloneClient).listSchedules();
    const summary = schedules.find((s) => s.name === 'summarize_orders');
    expect(summary).toMatchObject({ kind: 'summarize_orders', cron: '0 6 * * *' });
    expect(summary!.nextTickAt!.getTime()).toBeGreaterThan(Date.now());
    const listed = (await (await fetch(`${base}/cyclone/api/schedules`, { headers: { authorization } })).json()) as any;
    expect(listed.schedules.map((s: { name: string }) => s.name)).toContain('summarize_orders');
  });

  it('runs an export that takes a while, with progress and a lease renewed as it goes; a cancel stops its handler', async () => {
    const client = app.get(CycloneClient);
    const started = await post('/exports', { seconds: 3 });
    expect(started.status).toBe(202);
    const { runId } = (await started.json()) as { runId: string };
    const runningStep = (id: string) =>
      waitFor(
        'the export to run and report progress',
        async () => {
          const [step] = ((await (await fetch(`${base}/exports/${id}`)).json()) as any).steps;
          return step.state === 'running' && step.progress !== null ? step : undefined;
        },
        15_000,
      );
    const running = await runningStep(runId);
    expect(running).toMatchObject({ queue: 'exports', leaseOwner: expect.any(String), progress: { seconds: 3 } });
    expect(new Date(running.leaseExpiry).getTime()).toBeGreaterThan(Date.now());
    await expect(client.result(runId, { timeout: 20_000 })).resolves.toEqual({ seconds: 3, rows: 750 });

    const long = ((await (await post('/exports', { seconds: 600 })).json()) as { runId: string }).runId;
    await runningStep(long);
    const cancel = await post(`/exports/${long}/cancel`, {});
    expect(await cancel.json()).toEqual({ cancelled: true });
    // Its handler hears of it at its next heartbeat (a second here) and stops: the worker's slot is free.
    await waitFor('the cancelled export to stop', () => app.get(CycloneStats).running() === 0, 10_000);
    expect(await client.listSteps(long)).toMatchObject([{ state: 'cancelled' }]);
  });

  describe('onboarding workflow', () => {
    const getJson = async (path: string) => {
      const response = await fetch(`${base}${path}`);
      return { status: response.status, body: (await response.json()) as any };
    };

    /** GET /onboarding/:runId until `test` holds for the node states it returns. */
    function statusWhen(runId: string, test: (states: Record<string, string>) => boolean, what: string) {
      return waitFor(
        what,
        async () => {
          const { status, body } = await getJson(`/onboarding/${runId}`);
          expect(status).toBe(200);
          const states = Object.fromEntries((body.steps as any[]).map((s) => [s.nodeId, s.state]));
          return test(states) ? body : undefined;
        },
        15_000,
      );
    }

    /** The cooldown is ten minutes by default: make it due now instead of waiting. */
    async function endCooldown(runId: string): Promise<void> {
      const { rowCount } = await app
        .get(CycloneDatabase)
        .pool.query(`UPDATE cyclone_steps SET wake_at = now() WHERE run_id = $1 AND node_id = 'cooldown'`, [runId]);
      expect(rowCount).toBe(1);
    }

    it('runs onboarding over HTTP: one run per user, an approval at any time, a cooldown, then the welcome', async () => {
      const email = 'dee@example.com';
      const started = await post('/onboarding', { userId: 301, email });
      expect(started.status).toBe(202);
      const { runId } = (await started.json()) as { runId: string };
      expect(runId).toMatch(/^[0-9a-f-]{36}$/);

      // One onboarding per user while it is in progress.
      const again = await post('/onboarding', { userId: 301, email });
      expect(again.status).toBe(409);
      expect(await again.json()).toMatchObject({ code: 'duplicate', runId });

      // Approved at once: the run may not have reached the wait yet, and the signal is kept until it does.
      const approval = await post(`/onboarding/${runId}/approval`, { approvedBy: 'ops' });
      expect(approval.status).toBe(202);
      expect(typeof ((await approval.json()) as any).delivered).toBe('boolean');

      // Past the approval, the run sleeps through its cooldown (ten minutes away).
      const cooling = await statusWhen(runId, (s) => s.cooldown === 'waiting_timer', 'the cooldown');
      expect(cooling.run).toMatchObject({ id: runId, workflow: 'onboarding', state: 'running', uniqueKey: 'onboarding:301' });
      expect((cooling.steps as any[]).map((s) => [s.nodeId, s.type, s.kind, s.state])).toEqual([
        ['fetch', 'step', 'fetch_profile', 'completed'],
        ['score', 'step', 'score_profile', 'completed'],
        ['approval', 'signal', null, 'completed'],
        ['cooldown', 'sleep', null, 'waiting_timer'],
        ['welcome', 'step', 'send_welcome', 'pending'],
      ]);
      const cooldown = (cooling.steps as any[]).find((s) => s.nodeId === 'cooldown');
      expect(new Date(cooldown.wakeAt).getTime()).toBeGreaterThan(Date.now() + 8 * 60_000);
      expect((cooling.steps as any[]).find((s) => s.nodeId === 'approval').output).toEqual({ approvedBy: 'ops' });

      // The approval was consumed: a second one is refused.
      const second = await post(`/onboarding/${runId}/approval`, { approvedBy: 'someone else' });
      expect(second.status).toBe(409);
      expect(await second.json()).toMatchObject({ code: 'invalid_state' });

      await endCooldown(runId);
      await expect(app.get(CycloneClient).result(runId, { timeout: 15_000 })).resolves.toEqual({ welcome: { sentTo: email } });
      expect(await app.get(CycloneClient).output(runId, 'welcome')).toEqual({ sentTo: email });

      const done = await getJson(`/onboarding/${runId}`);
      expect(done.status).toBe(200);
      expect(done.body.run).toMatchObject({ id: runId, state: 'completed' });
      expect((done.body.steps as any[]).map((s) => [s.nodeId, s.state])).toEqual([
        ['fetch', 'completed'],
        ['score', 'completed'],
        ['approval', 'completed'],
        ['cooldown', 'completed'],
        ['welcome', 'completed'],
      ]);
      expect((done.body.steps as any[]).find((s) => s.nodeId === 'welcome').output).toEqual({ sentTo: email });

      // Finished: an approval now is refused, and the user may be onboarded again.
      const late = await post(`/onboarding/${runId}/approval`, { approvedBy: 'ops' });
      expect(late.status).toBe(409);
      const restarted = await post('/onboarding', { userId: 301, email });
      expect(restarted.status).toBe(202);
      expect(((await restarted.json()) as any).runId).not.toBe(runId);
    });

    it('an approval that arrives while the run waits for it is delivered at once', async () => {
      const email = 'eve@example.com';
      const started = await post('/onboarding', { userId: 302, email });
      expect(started.status).toBe(202);
      const { runId } = (await started.json()) as { runId: string };

      await statusWhen(runId, (s) => s.approval === 'waiting_signal', 'the approval wait');
      const approval = await post(`/onboarding/${runId}/approval`, { approvedBy: 'lead' });
      expect(approval.status).toBe(202);
      expect(await approval.json()).toEqual({ delivered: true });

      await statusWhen(runId, (s) => s.cooldown === 'waiting_timer', 'the cooldown');
      await endCooldown(runId);
      await expect(app.get(CycloneClient).result(runId, { timeout: 15_000 })).resolves.toEqual({ welcome: { sentTo: email } });
    });

    it('answers 404 for an approval or a status of a run that does not exist', async () => {
      for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-run-id']) {
        const approval = await post(`/onboarding/${id}/approval`, { approvedBy: 'ops' });
        expect(approval.status).toBe(404);
        expect(await approval.json()).toMatchObject({ code: 'run_not_found' });
        const status = await getJson(`/onboarding/${id}`);
        expect(status.status).toBe(404);
        expect(status.body).toMatchObject({ code: 'run_not_found' });
      }
    });
  });
  describe('checkout, a workflow written as code', () => {
    async function placed(items: string[]) {
      const response = await post('/checkouts', { customerId: 9, items });
      expect(response.status).toBe(202);
      const { runId } = (await response.json()) as { runId: string };
      const result = await fetch(`${base}/checkouts/${runId}/result`);
      expect(result.status).toBe(200);
      const status = (await (await fetch(`${base}/checkouts/${runId}`)).json()) as { steps: { nodeId: string; type: string; state: string }[] };
      return { runId, outcome: (await result.json()) as Record<string, unknown>, steps: status.steps };
    }

    it('reserves every item at once, then charges the customer', async () => {
      const { outcome, steps } = await placed(['mug', 'tea', 'spoon']);
      expect(outcome).toMatchObject({ status: 'placed', total: 75, chargeId: `ch_${outcome.orderRef}` });
      expect(steps.map((s) => [s.nodeId, s.type, s.state])).toEqual([
        ['checkout', 'workflow', 'completed'],
        ['order-ref', 'run', 'completed'],
        ['price', 'run', 'completed'],
        ['reserve-0', 'step', 'completed'],
        ['reserve-1', 'step', 'completed'],
        ['reserve-2', 'step', 'completed'],
        ['charge', 'step', 'completed'],
      ]);
    });

    it('releases what it reserved when an item cannot be reserved, and cancels', async () => {
      const { outcome, steps } = await placed(['mug', 'sold-out-kettle', 'tea']);
      expect(outcome).toMatchObject({ status: 'cancelled', unavailable: ['sold-out-kettle'], released: ['mug', 'tea'] });
      expect(steps.filter((s) => s.nodeId.startsWith('release-')).map((s) => [s.nodeId, s.state])).toEqual([
        ['release-0', 'completed'],
        ['release-2', 'completed'],
      ]);
      expect(steps.find((s) => s.nodeId === 'reserve-1')).toMatchObject({ state: 'discarded' });
      expect(steps.some((s) => s.nodeId === 'charge')).toBe(false);
    });
  });

  describe('bad request bodies', () => {
    const JSON_TYPE = 'application/json';
    const send = (path: string, body: string, type: string) =>
      fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': type }, body });
    const json = (value: unknown) => JSON.stringify(value);
    const long = `${'a'.repeat(8 * 1024)}@example.com`;
    const runId = '00000000-0000-4000-8000-000000000000';

    /** [what, path, body, content type] (a row shorter than the test's parameters would make jest wait for a done callback). */
    const cases: [string, string, string, string][] = [
      ['a text/plain body', '/reports', 'userId=7', 'text/plain'],
      ['an empty object', '/reports', json({}), JSON_TYPE],
      ['a userId that is a string', '/reports', json({ userId: '7', email: 'ada@example.com', period: '2026-11' }), JSON_TYPE],
      ['a period that is not a month', '/reports', json({ userId: 7, email: 'ada@example.com', period: '2026-13' }), JSON_TYPE],
      ['an unknown field', '/reports', json({ userId: 7, email: 'ada@example.com', period: '2026-11', admin: true }), JSON_TYPE],
      ['an 8 KB email', '/reports', json({ userId: 7, email: long, period: '2026-11' }), JSON_TYPE],
      ['an array', '/reports', json([1, 2]), JSON_TYPE],
      ['malformed JSON', '/reports', '{"userId": 7,', JSON_TYPE],
      ['no body', '/users', '', JSON_TYPE],
      ['an empty object', '/users', json({}), JSON_TYPE],
      ['a NUL in the email', '/users', json({ email: 'ada\u0000@example.com' }), JSON_TYPE],
      ['an 8 KB email', '/users', json({ email: long }), JSON_TYPE],
      ['an email that is a number', '/users', json({ email: 42 }), JSON_TYPE],
      ['a text/plain body', '/users', 'ada@example.com', 'text/plain'],
      ['an empty object', '/onboarding', json({}), JSON_TYPE],
      ['a fractional userId', '/onboarding', json({ userId: 1.5, email: 'ada@example.com' }), JSON_TYPE],
      ['an 8 KB email', '/onboarding', json({ userId: 7, email: long }), JSON_TYPE],
      ['a NUL in the approver', `/onboarding/${runId}/approval`, json({ approvedBy: 'o\u0000ps' }), JSON_TYPE],
      ['half an emoji as the approver', `/onboarding/${runId}/approval`, json({ approvedBy: '\ud83d' }), JSON_TYPE],
      ['an approver that is an object', `/onboarding/${runId}/approval`, json({ approvedBy: { name: 'ops' } }), JSON_TYPE],
      ['no approver', `/onboarding/${runId}/approval`, json({}), JSON_TYPE],
      ['an order without a total', '/orders', json({ userId: 1 }), JSON_TYPE],
      ['a negative total', '/orders', json({ userId: 1, totalCents: -5 }), JSON_TYPE],
      ['an export of ten hours', '/exports', json({ seconds: 36_000 }), JSON_TYPE],
      // 3 KB nested too deep to validate recursively: refused before validation, not a stack overflow (a 500).
      ...['/reports', '/users', '/onboarding', `/onboarding/${runId}/approval`, '/orders', '/exports'].map(
        (path): [string, string, string, string] => ['an array nested 1,500 levels deep', path, `${'['.repeat(1_500)}${']'.repeat(1_500)}`, JSON_TYPE],
      ),
      ['an email nested 1,500 levels deep', '/users', `{"email":${'['.repeat(1_500)}${']'.repeat(1_500)}}`, JSON_TYPE],
      ['an object nested 3,000 levels deep', '/reports', `${'{"a":'.repeat(3_000)}1${'}'.repeat(3_000)}`, JSON_TYPE],
    ];

    it.each(cases)('%s to POST %s is a 400 that says what is wrong, and writes nothing', async (what, path, body, type) => {
      const database = app.get(CycloneDatabase);
      const count = async () =>
        (
          await database.dataSource.query(
            `SELECT (SELECT count(*) FROM cyclone_runs)::int AS runs, (SELECT count(*) FROM users)::int AS users,
                    (SELECT count(*) FROM orders)::int AS orders`,
          )
        )[0];
      const before = await count();
      const response = await send(path, body, type);
      expect(response.status).toBe(400);
      const answer = (await response.json()) as { message?: unknown };
      expect(JSON.stringify(answer.message ?? '')).not.toBe('""');
      if (what.includes('levels deep')) expect(JSON.stringify(answer.message)).toContain('nested more than 32 levels deep');
      expect(await count()).toEqual(before);
    });
  });
  it('as a worker-only process serves GET /metrics and GET /health on a port of its own, for Prometheus and a container healthcheck', async () => {
    process.env = { ...savedEnv, CYCLONE_ROLE: 'worker', CYCLONE_DATABASE_URL: proxy.urlFor(new URL(database.url).pathname.slice(1)) };
    // A worker serves no dashboard, so it needs no login.
    delete process.env.DASHBOARD_USER;
    delete process.env.DASHBOARD_PASSWORD;
    const worker = await NestFactory.createApplicationContext(AppModule.register(), { logger: ['error'] });
    const server = serveWorkerEndpoints(worker, 0);
    try {
      await new Promise((resolve) => server.once('listening', resolve));
      const origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      const health = await fetch(`${origin}/health`);
      expect(health.status).toBe(200);
      expect(((await health.json()) as any).cyclone).toMatchObject({ status: 'up', database: 'up' });
      const metrics = await fetch(`${origin}/metrics`);
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain('cyclone_queue_steps');
      expect((await fetch(`${origin}/`)).status).toBe(404);
    } finally {
      server.close();
      await worker.close();
    }
  });

  describe('while the database is down', () => {
    it('answers 503 on every route that needs it, POST /users too, naming no database server; then works again', async () => {
      const headers = { 'content-type': 'application/json', authorization };
      await proxy.down();
      try {
        const requests: [string, string, unknown][] = [
          ['POST', '/users', { email: 'down@example.com' }],
          ['POST', '/orders', { userId: 1, totalCents: 100 }],
          ['POST', '/reports', { userId: 9, email: 'down@example.com', period: '2026-11' }],
          ['POST', '/exports', { seconds: 1 }],
          ['GET', '/cyclone/api/queues', undefined],
        ];
        for (const [method, path, body] of requests) {
          const response = await fetch(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
          const text = await response.text();
          expect([method, path, response.status]).toEqual([method, path, 503]);
          expect(JSON.parse(text)).toEqual({
            statusCode: 503,
            code: 'database_unavailable',
            message: 'The database could not serve the request, so nothing was written. Try again shortly.',
          });
        }
        const health = await fetch(`${base}/health`);
        expect(health.status).toBe(503);
        const text = await health.text();
        expect(JSON.parse(text).error.cyclone).toMatchObject({ status: 'down', database: 'unreachable' });
        for (const secret of [String(proxy.port), '127.0.0.1', new URL(database.url).pathname.slice(1)]) expect(text).not.toContain(secret);
      } finally {
        await proxy.up();
      }
      await waitFor('POST /users to work again', async () => (await post('/users', { email: 'back@example.com' })).status === 201, 15_000);
    });
  });
});
