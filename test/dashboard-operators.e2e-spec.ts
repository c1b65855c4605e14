import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { CycloneStats, PermanentError, Step, defineWorkflow, type StepContext } from 'cyclone-nestjs';
import type { DashboardThroughput, Wire } from 'cyclone-nestjs/dashboard';
import { QUEUE_THROUGHPUT } from '../libs/cyclone/src/sql/dashboard.sql.js';
import { THROUGHPUT_MINUTE_SAMPLE } from '../libs/cyclone/src/dashboard/dashboard.constants.js';
import { TestBasicAuthGuard, DashboardApp } from './support/dashboard-app.js';
import { HandlerProbe } from './support/handler-probe.js';
import { sql } from './support/sql.js';
import { statementReads } from './support/statement-reads.js';
import { waitFor } from './support/wait.js';

/**
 * The dashboard's operator actions and views (SPEC §19) through its API:
 * retry and cancel by the current filter, confirmed with the count; run now
 * for a step that waits; the kind and queue pickers; the clients running
 * now; a queue's throughput per minute over the last hour.
 */

const probe = new HandlerProbe();
const attempts: { runId: string; attempt: number }[] = [];

@Injectable()
class OperatorSteps {
  /** Fails for good on its first attempt; a retry (one more attempt) succeeds. */
  @Step('ops_fail_once')
  async failOnce(_input: unknown, ctx: StepContext) {
    if (ctx.attempt === 1) throw new PermanentError('first attempt fails for good');
    return 'second attempt';
  }

  @Step('ops_hold')
  async hold(_input: unknown, ctx: StepContext) {
    return probe.cooperate(ctx);
  }

  /** Its first attempt fails and backs off for an hour. */
  @Step('ops_backoff', { maxAttempts: 3, backoff: () => '1h' })
  async backoff(_input: unknown, ctx: StepContext) {
    attempts.push({ runId: ctx.runId, attempt: ctx.attempt });
    if (ctx.attempt === 1) throw new Error('try again later');
    return 'done';
  }

  @Step('ops_quick')
  async quick() {
    return 'quick';
  }
}

const Nightly = defineWorkflow('ops_nightly').step('only', 'ops_quick');

let app: DashboardApp;
let readOnly: DashboardApp;

beforeAll(async () => {
  app = await DashboardApp.start({
    providers: [OperatorSteps],
    cyclone: {
      queues: { default: { workers: 4 }, reports: { workers: 2 }, bulk_a: { workers: 1 }, bulk_b: { workers: 1 }, bulk_c: { workers: 1 } },
      leaseTtl: '600ms',
      workflows: [Nightly],
    },
  });
  readOnly = await DashboardApp.start({
    databaseUrl: app.databaseUrl,
    cyclone: { runWorkers: false },
    dashboard: { guard: TestBasicAuthGuard, readOnly: true },
  });
});
afterAll(async () => {
  probe.releaseAll();
  await readOnly?.close();
  await app?.close();
});

const clientIdOf = (on: DashboardApp) => on.app.get(CycloneStats).clientId;
const stateOf = async (runId: string) => (await app.client.getRun(runId)).state;
const failedRun = async (queue = 'default') => {
  const runId = await app.client.enqueue('ops_fail_once', {}, { queue });
  await waitFor('the run to fail', async () => (await stateOf(runId)) === 'failed');
  return runId;
};

describe('retry and cancel by filter', () => {
  it('counts what the action applies to, acts on that many once confirmed with the page’s token, and leaves newer runs alone', async () => {
    const failed = [await failedRun(), await failedRun(), await failedRun()];
    const other = await app.client.enqueue('ops_hold', {});
    await probe.call(other);

    const preview = await app.json('/cyclone/api/bulk/retry?kind=ops_fail_once&state=failed');
    expect(preview).toEqual({ status: 200, body: { action: 'retry', count: 3, upTo: failed[2], tooMany: false, limit: 1_000 } });
    // Without the page's token nothing happens.
    const forged = await app.request(`/cyclone/api/bulk/retry?kind=ops_fail_once&upTo=${failed[2]}&confirmed=3`, { method: 'POST' });
    expect(forged.status).toBe(403);
    expect(await stateOf(failed[0])).toBe('failed');

    // A run that fails after the preview is newer than what was confirmed: it is left alone.
    const later = await failedRun();
    const { status, body } = await app.act(`/cyclone/api/bulk/retry?kind=ops_fail_once&state=failed&upTo=${failed[2]}&confirmed=3`);
    expect([status, body]).toEqual([200, { action: 'retry', matched: 3, changed: 3, failed: [] }]);
    for (const runId of failed) await expect(app.client.result(runId, { timeout: 10_000 })).resolves.toBe('second attempt');
    expect(await stateOf(later)).toBe('failed');
    expect(await stateOf(other)).toBe('running');
    probe.of(other)[0].release('done');
  });

  it('refuses, doing nothing, when more runs match than were confirmed; acts on fewer and says how many', async () => {
    const queue = 'bulk_a';
    const runs = [await failedRun(queue), await failedRun(queue)];
    const refused = await app.act(`/cyclone/api/bulk/retry?queue=${queue}&upTo=${runs[1]}&confirmed=1`);
    expect(refused).toEqual({
      status: 409,
      body: {
        statusCode: 409,
        code: 'count_changed',
        message: '2 runs match now, more than the 1 you confirmed; nothing was done. Look at the list again and confirm the new count.',
      },
    });
    for (const runId of runs) expect(await stateOf(runId)).toBe('failed');

    // Cancel: two running; one finishes before the action, which then cancels the other and says so.
    const held = [await app.client.enqueue('ops_hold', {}, { queue: 'reports' }), await app.client.enqueue('ops_hold', {}, { queue: 'reports' })];
    await Promise.all(held.map((runId) => probe.call(runId)));
    const preview = (await app.json('/cyclone/api/bulk/cancel?queue=reports')).body;
    expect(preview).toMatchObject({ count: 2, upTo: held[1] });
    probe.of(held[0])[0].release('done');
    await waitFor('the first to complete', async () => (await stateOf(held[0])) === 'completed');
    const done = await app.act(`/cyclone/api/bulk/cancel?queue=reports&upTo=${preview.upTo}&confirmed=2`);
    expect(done.body).toEqual({ action: 'cancel', matched: 1, changed: 1, failed: [] });
    expect(await stateOf(held[1])).toBe('cancelled');
    await expect(probe.of(held[1])[0].aborted).resolves.toMatchObject({ code: 'step_cancelled' });
  });

  it('reports a run it could not act on, and acts on the others', async () => {
    const queue = 'bulk_b';
    const holderless = await app.client.enqueue('ops_fail_once', {}, { queue, unique: 'bulk-key' });
    await waitFor('it to fail', async () => (await stateOf(holderless)) === 'failed');
    // Its key is free once it failed: another run takes it, so retrying the first would be a duplicate.
    const taker = await app.client.enqueue('ops_quick', {}, { queue: 'unserved', unique: 'bulk-key' });
    const plain = await failedRun(queue);
    const preview = (await app.json(`/cyclone/api/bulk/retry?queue=${queue}`)).body;
    const { body } = await app.act(`/cyclone/api/bulk/retry?queue=${queue}&upTo=${preview.upTo}&confirmed=${preview.count}`);
    expect(body).toEqual({
      action: 'retry',
      matched: 2,
      changed: 1,
      failed: [{ runId: holderless, message: expect.stringContaining(taker) }],
    });
    await expect(app.client.result(plain, { timeout: 10_000 })).resolves.toBe('second attempt');
    expect(await stateOf(holderless)).toBe('failed');
  });

  it('says when more runs match than one action takes, and refuses them', async () => {
    // 1,001 failed runs, written as a failed job's rows are.
    await sql(
      app.databaseUrl,
      `WITH runs AS (
         INSERT INTO cyclone_runs (id, kind, state, queue, retention, finished_at)
         SELECT cyclone_uuid7(), 'ops_fail_once', 'failed', 'bulk_many', interval '1 day', now() FROM generate_series(1, 1001)
         RETURNING id)
       INSERT INTO cyclone_steps (run_id, node_id, kind, queue, state, max_attempts, finished_at, error, error_kind)
       SELECT id, 'ops_fail_once', 'ops_fail_once', 'bulk_many', 'discarded', 1, now(), 'failed', 'permanent' FROM runs`,
    );
    const { body } = await app.json('/cyclone/api/bulk/retry?queue=bulk_many');
    expect(body).toMatchObject({ count: 1_000, tooMany: true, limit: 1_000 });
    const refused = await app.act(`/cyclone/api/bulk/retry?queue=bulk_many&upTo=${body.upTo}&confirmed=1000`);
    expect(refused).toMatchObject({ status: 409, body: { code: 'count_changed' } });
    const [{ n }] = await sql(app.databaseUrl, `SELECT count(*)::int AS n FROM cyclone_runs WHERE queue = 'bulk_many' AND state = 'failed'`);
    expect(n).toBe(1_001);
  });

  it.each([
    ['an unknown action', '/cyclone/api/bulk/delete?confirmed=1', 'action'],
    ['no count confirmed', '/cyclone/api/bulk/retry', 'confirmed'],
    ['a count past the limit', '/cyclone/api/bulk/retry?confirmed=1001', 'confirmed'],
    ['a count that is no number', '/cyclone/api/bulk/cancel?confirmed=all', 'confirmed'],
    ['an unknown parameter', '/cyclone/api/bulk/cancel?confirmed=1&force=1', 'force'],
    ['an upTo that is no run id', '/cyclone/api/bulk/cancel?confirmed=1&upTo=x', 'upTo'],
    ['a bad filter', '/cyclone/api/bulk/cancel?confirmed=1&state=gone', 'state'],
  ])('refuses %s with 400 naming the parameter', async (_what, path, parameter) => {
    expect(await app.act(path)).toMatchObject({ status: 400, body: { code: 'invalid_parameter', parameter } });
  });

  it('is no route on a read-only dashboard', async () => {
    const runId = await failedRun('bulk_c');
    const response = await readOnly.request(`/cyclone/api/bulk/retry?queue=bulk_c&upTo=${runId}&confirmed=1`, {
      method: 'POST',
      headers: { 'x-cyclone-csrf': 'A'.repeat(43), cookie: `cyclone_csrf=${'A'.repeat(43)}` },
    });
    expect(response.status).toBe(404);
    expect(await stateOf(runId)).toBe('failed');
  });
});

describe('run now', () => {
  it('makes a delayed job due at once; its worker starts it without waiting for the poll', async () => {
    const runId = await app.client.enqueue('ops_quick', {}, { processIn: '1h' });
    expect(await app.act(`/cyclone/api/runs/${runId}/nodes/ops_quick/run-now`)).toEqual({ status: 200, body: { changed: true } });
    await expect(app.client.result(runId, { timeout: 10_000 })).resolves.toBe('quick');
    expect(await app.act(`/cyclone/api/runs/${runId}/nodes/ops_quick/run-now`)).toMatchObject({
      status: 409,
      body: { code: 'invalid_state', message: expect.stringContaining('is completed; only a step waiting to run') },
    });
  });

  it('ends a retry’s backoff without consuming an attempt', async () => {
    const runId = await app.client.enqueue('ops_backoff', {});
    const backingOff = await waitFor('the first attempt to fail', async () => {
      const [step] = await app.client.listSteps(runId);
      return step.attempts.length === 1 && step.state === 'available' ? step : undefined;
    });
    expect(backingOff.scheduledAt.getTime() - Date.now()).toBeGreaterThan(50 * 60_000);
    expect((await app.act(`/cyclone/api/runs/${runId}/nodes/ops_backoff/run-now`)).body).toEqual({ changed: true });
    await expect(app.client.result(runId, { timeout: 10_000 })).resolves.toBe('done');
    expect(attempts.filter((a) => a.runId === runId).map((a) => a.attempt)).toEqual([1, 2]);
    const [step] = await app.client.listSteps(runId);
    expect(step).toMatchObject({ attempt: 2, maxAttempts: 3 });
  });

  it('changes nothing for a step due already, refuses one that is not waiting, and is no route read-only', async () => {
    const due = await app.client.enqueue('ops_quick', {}, { queue: 'unserved' });
    expect((await app.act(`/cyclone/api/runs/${due}/nodes/ops_quick/run-now`)).body).toEqual({ changed: false });
    expect(await app.act(`/cyclone/api/runs/${due}/nodes/nope/run-now`)).toMatchObject({ status: 404, body: { code: 'step_not_found' } });
    const delayed = await app.client.enqueue('ops_quick', {}, { processIn: '1h' });
    const response = await readOnly.request(`/cyclone/api/runs/${delayed}/nodes/ops_quick/run-now`, {
      method: 'POST',
      headers: { 'x-cyclone-csrf': 'A'.repeat(43), cookie: `cyclone_csrf=${'A'.repeat(43)}` },
    });
    expect(response.status).toBe(404);
    const [step] = await app.client.listSteps(delayed);
    expect(step.scheduledAt.getTime() - Date.now()).toBeGreaterThan(50 * 60_000);
  });
});

describe('the pickers', () => {
  it('offer the kinds and queues that have runs, that clients registered or serve, and paused queues', async () => {
    await app.client.start(Nightly, {});
    await app.client.enqueue('ops_quick', {}, { queue: 'only_in_runs' });
    // A queue known only by its runs, paused, whose runs retention then deleted: still paused, still offered.
    const gone = await app.client.enqueue('ops_quick', {}, { queue: 'only_paused' });
    await app.client.pauseQueue('only_paused');
    for (const table of ['cyclone_attempts', 'cyclone_steps']) await sql(app.databaseUrl, `DELETE FROM ${table} WHERE run_id = $1`, [gone]);
    await sql(app.databaseUrl, 'DELETE FROM cyclone_runs WHERE id = $1', [gone]);
    try {
      const { status, body } = await app.json('/cyclone/api/names');
      expect(status).toBe(200);
      // Registered kinds with no run yet, and a workflow's name.
      expect(body.kinds).toEqual(expect.arrayContaining(['ops_backoff', 'ops_fail_once', 'ops_hold', 'ops_quick', 'ops_nightly']));
      expect(body.queues).toEqual(expect.arrayContaining(['default', 'reports', 'only_in_runs', 'only_paused']));
      expect(body.kinds).toEqual([...body.kinds].sort());
      expect(new Set(body.queues).size).toBe(body.queues.length);
    } finally {
      await app.client.resumeQueue('only_paused');
    }
  });
});

describe('the clients running now', () => {
  it('each with its host, the queues it serves, the slots in use and its last heartbeat; gone ones are not shown', async () => {
    const runId = await app.client.enqueue('ops_hold', {}, { queue: 'reports' });
    await probe.call(runId);
    await sql(app.databaseUrl, `INSERT INTO cyclone_clients (id, host, pid, heartbeat_at) VALUES ('gone:1:x', 'gone', 1, now() - interval '1 minute')`);
    const { body } = await app.json('/cyclone/api/clients');
    expect(body.refreshIntervalSeconds).toBe(10);
    expect(body.clients.map((c: { id: string }) => c.id).sort()).toEqual([clientIdOf(app), clientIdOf(readOnly)].sort());
    const worker = body.clients.find((c: { id: string }) => c.id === clientIdOf(app));
    expect(worker).toMatchObject({
      pid: process.pid,
      queues: expect.arrayContaining([
        { name: 'default', slots: 4, running: expect.any(Number) },
        { name: 'reports', slots: 2, running: 1 },
      ]),
      version: expect.stringMatching(/^\d+\.\d+\.\d+/),
    });
    expect(Date.now() - Date.parse(worker.heartbeatAt)).toBeLessThan(60_000);
    expect(body.clients.find((c: { id: string }) => c.id === clientIdOf(readOnly)).queues).toEqual([]);
    await app.act(`/cyclone/api/runs/${runId}/cancel`);
  });
});

describe('a queue’s throughput over the last hour', () => {
  /**
   * Finished steps of a queue: `perMinute` in each of the `minutes` minutes
   * before this one, a fifth of them discarded. Returns this minute's start.
   */
  async function finish(queue: string, minutes: number, perMinute: number): Promise<number> {
    const [{ minute }] = await sql<{ minute: Date }>(app.databaseUrl, `SELECT date_trunc('minute', now()) AS minute`);
    await sql(
      app.databaseUrl,
      `WITH runs AS (
         INSERT INTO cyclone_runs (id, kind, state, queue, retention, finished_at)
         SELECT cyclone_uuid7(), 'ops_quick', 'completed', $1, interval '1 day', now() FROM generate_series(1, $2::int * $3::int)
         RETURNING id)
       INSERT INTO cyclone_steps (run_id, node_id, kind, queue, state, max_attempts, finished_at)
       SELECT id, 'ops_quick', 'ops_quick', $1, CASE WHEN n % 5 = 0 THEN 'discarded' ELSE 'completed' END, 1,
              $4::timestamptz - ((n - 1) / $3::int + 1) * interval '1 minute' + ((n - 1) % $3::int) * (interval '59 seconds' / $3::int)
         FROM (SELECT id, row_number() OVER () AS n FROM runs) r`,
      [queue, minutes, perMinute, minute],
    );
    return minute.getTime();
  }

  /** The answer's minutes that start `back` minutes before `minute`. */
  const before = (body: Wire<DashboardThroughput>, minute: number, back: number[]) =>
    back.map((k) => body.minutes.find((m) => Date.parse(m.at) === minute - k * 60_000)!);
  const chart = async (queue: string) => (await app.json<Wire<DashboardThroughput>>(`/cyclone/api/queues/${queue}/throughput`)).body;

  it('counts each quiet minute exactly, and estimates a busy one from its latest steps', async () => {
    const quiet = await finish('charted', 3, 10);
    const body = await chart('charted');
    expect(body.minutes).toHaveLength(60);
    const counted = before(body, quiet, [3, 2, 1]);
    expect(counted.map((m) => [m.completed, m.failed, m.estimated])).toEqual([
      [8, 2, false],
      [8, 2, false],
      [8, 2, false],
    ]);
    const total = body.minutes.reduce((n, m) => n + m.completed + m.failed, 0);
    expect(total).toBe(30);

    const busyMinute = await finish('charted_busy', 2, 1_500);
    const busy = before(await chart('charted_busy'), busyMinute, [2, 1]);
    for (const minute of busy) {
      expect(minute.estimated).toBe(true);
      expect(minute.completed + minute.failed).toBeGreaterThan(1_300);
      expect(minute.completed + minute.failed).toBeLessThan(1_700);
    }
  });

  it('reads a bounded sample of each minute however many steps finished in it', async () => {
    // At most the sample's rows a minute (each a heap page at worst), and a few index pages.
    const bound = 60 * (THROUGHPUT_MINUTE_SAMPLE + 20);
    const reads = () => statementReads(app.databaseUrl, 2, 60, async () => [QUEUE_THROUGHPUT.text, ['heavy', THROUGHPUT_MINUTE_SAMPLE]]);
    await finish('heavy', 60, 500);
    expect(await reads()).toBeLessThan(bound);
    // Nine times as many: 300,000 steps finished in the hour.
    await finish('heavy', 60, 4_500);
    await sql(app.databaseUrl, 'ANALYZE cyclone_steps');
    expect(await reads()).toBeLessThan(bound);
  }, 120_000);

  it('refuses a queue name it cannot be, naming the parameter', async () => {
    expect(await app.json(`/cyclone/api/queues/${'q'.repeat(201)}/throughput`)).toMatchObject({
      status: 400,
      body: { code: 'invalid_parameter', parameter: 'queue' },
    });
  });
});
