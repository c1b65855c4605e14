import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { NestFactory } from '@nestjs/core';
import type { INestApplication } from '@nestjs/common';
import { CycloneClient, CycloneDatabase } from 'cyclone-nestjs';
import { TestDatabase } from 'cyclone-nestjs/testing';
import { AppModule } from '../src/app.module.js';
import { parseExposition } from './support/prometheus.js';
import { waitFor } from './support/wait.js';

/** The example app as deployed: real HTTP, CYCLONE_DATABASE_URL pointing at a fresh database. */
describe('example app', () => {
  let database: TestDatabase;
  let app: INestApplication;
  let base: string;
  const savedUrl = process.env.CYCLONE_DATABASE_URL;

  beforeAll(async () => {
    database = await TestDatabase.create(process.env.CYCLONE_TEST_DATABASE_URL!);
    process.env.CYCLONE_DATABASE_URL = database.url;
    app = await NestFactory.create(AppModule, { logger: ['error'] });
    await app.listen(0, '127.0.0.1');
    base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  });

  afterAll(async () => {
    await app?.close();
    await database?.drop();
    if (savedUrl === undefined) delete process.env.CYCLONE_DATABASE_URL;
    else process.env.CYCLONE_DATABASE_URL = savedUrl;
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

  it('serves the dashboard at /cyclone behind HTTP Basic (admin / cyclone by default)', async () => {
    const refused = await fetch(`${base}/cyclone`);
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toContain('Basic');
    expect((await fetch(`${base}/cyclone/api/queues`, { headers: { authorization: 'Basic YWRtaW46d3Jvbmc=' } })).status).toBe(401);
    const authorization = `Basic ${Buffer.from('admin:cyclone').toString('base64')}`;
    const page = await fetch(`${base}/cyclone`, { headers: { authorization } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('data-base="/cyclone"');
    const queues = (await (await fetch(`${base}/cyclone/api/queues`, { headers: { authorization } })).json()) as any;
    expect(queues.queues.map((q: { name: string }) => q.name)).toEqual(expect.arrayContaining(['default', 'reports']));
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
    ];

    it.each(cases)('%s to POST %s is a 400 that says what is wrong, and writes nothing', async (_what, path, body, type) => {
      const database = app.get(CycloneDatabase);
      const count = async () =>
        (
          await database.dataSource.query(
            `SELECT (SELECT count(*) FROM cyclone_runs)::int AS runs, (SELECT count(*) FROM example_users)::int AS users`,
          )
        )[0];
      const before = await count();
      const response = await send(path, body, type);
      expect(response.status).toBe(400);
      const answer = (await response.json()) as { message?: unknown };
      expect(JSON.stringify(answer.message ?? '')).not.toBe('""');
      expect(await count()).toEqual(before);
    });
  });
});
