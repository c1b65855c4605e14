import { describe, it, expect, beforeEach } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import pg from 'pg';
import { PermanentError, Step, Workflow, defineWorkflow, type StepContext, type WorkflowContext } from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { RecoverySweeper } from '../libs/cyclone/src/maintenance/recovery.sweeper.js';
import { untilRunningStepsLapse } from './support/e2e-helpers.js';
import { HandlerProbe, POLLING_OFF, claimAsDeadWorker, firstPollTick, testEnvs } from './support/handler-probe.js';
import { untilStates } from './support/node-states.js';
import { sql } from './support/sql.js';
import { waitFor } from './support/wait.js';

/**
 * Broker dispatch's outbox (SPEC §17): every write that makes a step
 * available writes the step's outbox row in the same transaction, due at the
 * step's scheduled_at, while dispatch is on for the database. The clients
 * here run without the dispatch option, so no publisher takes the rows away
 * and no Redis is needed: dispatch is turned on for the database by hand,
 * with the row a client with dispatch on keeps up to date. Each path is
 * driven as a user drives it, and the rows it wrote are read back: one per
 * step it made available, for exactly those steps.
 */

const probe = new HandlerProbe();
/** The backoff of `fails_once`, and how long `snoozes_once` snoozes. */
let retryAfterMs = 3_600_000;
let snoozeMs = 3_600_000;
/** Runs whose `fails_once` or `snoozes_once` handler has had its first call. */
const firstCalls = new Set<string>();

@Injectable()
class OutboxSteps {
  @Step('quick')
  async quick() {
    return 'done';
  }

  /** Holds until the test releases it: returns what it is released with, throws it if it is an Error. */
  @Step('held')
  async held(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }

  @Step('fails_once', { maxAttempts: 2, backoff: () => retryAfterMs })
  async failsOnce(_input: unknown, ctx: StepContext) {
    if (!firstCalls.has(ctx.runId)) {
      firstCalls.add(ctx.runId);
      throw new Error('first attempt fails');
    }
    return 'second attempt';
  }

  @Step('snoozes_once')
  async snoozesOnce(_input: unknown, ctx: StepContext) {
    if (!firstCalls.has(ctx.runId)) {
      firstCalls.add(ctx.runId);
      return ctx.snooze(snoozeMs);
    }
    return 'woke';
  }

  /** Fails permanently at its first call of a run, then succeeds. */
  @Step('refuses_once')
  async refusesOnce(_input: unknown, ctx: StepContext) {
    if (!firstCalls.has(`${ctx.runId}/${ctx.nodeId}`)) {
      firstCalls.add(`${ctx.runId}/${ctx.nodeId}`);
      throw new PermanentError('refused');
    }
    return 'accepted';
  }

  /** On a queue that the environments' workers do not serve: claimed only by hand, or by a client that serves it. */
  @Step('stranded', { queue: 'stranded' })
  async stranded(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }
}

@Injectable()
class OutboxFlows {
  /** A code workflow: one durable step, whose completion wakes the method up. */
  @Workflow('greeting')
  async greeting(input: { name: string }, wf: WorkflowContext<{ name: string }>) {
    const greeted = await wf.step('greet', 'held', input);
    return { greeted };
  }
}

/** Two roots (a, e), b below a, c below both. */
const Fork = defineWorkflow<object>('fork')
  .step('a', 'quick')
  .step('e', 'quick')
  .step('b', 'quick', { after: ['a'] })
  .step('c', 'quick', { after: ['a', 'e'] });
const Relay = defineWorkflow<object>('relay')
  .step('first', 'held')
  .step('second', 'held', { after: ['first'] })
  .step('third', 'held', { after: ['second'] });
const Nap = defineWorkflow<object>('nap').sleep('nap', '1h').step('after', 'held', { after: ['nap'] });
const Approval = defineWorkflow<object>('approval').waitForSignal('approval').step('after', 'held', { after: ['approval'] });
const Refused = defineWorkflow<object>('refused').step('a', 'held').step('b', 'held', { after: ['a'] });
const Pair = defineWorkflow<object>('pair').step('a', 'held').step('b', 'held').step('c', 'held', { after: ['a', 'b'] });
/** For the runs with dispatch off, which run to their end. */
const QuickChain = defineWorkflow<object>('quick-chain').step('a', 'quick').step('b', 'quick', { after: ['a'] });
const QuickNap = defineWorkflow<object>('quick-nap').sleep('nap', 50).step('after', 'quick', { after: ['nap'] });
const QuickApproval = defineWorkflow<object>('quick-approval').waitForSignal('approval').step('after', 'quick', { after: ['approval'] });
const RefusedOnce = defineWorkflow<object>('refused-once').step('a', 'refuses_once').step('b', 'refuses_once');

const workflows = [Fork, Relay, Nap, Approval, Refused, Pair, QuickChain, QuickNap, QuickApproval, RefusedOnce];
const providers = [OutboxSteps, OutboxFlows];
const { createEnv } = testEnvs(providers, probe);
const fastPoll: [number, number] = [20, 50];
const HOUR = 3_600_000;

beforeEach(() => {
  retryAfterMs = HOUR;
  snoozeMs = HOUR;
  firstCalls.clear();
});

/** A client that runs no workers: nothing moves but what the test does. */
const idleEnv = () => createEnv({ workflows, runWorkers: false });
/** A client whose workers run the handlers. */
const workingEnv = () => createEnv({ workflows, pollInterval: fastPoll });
/**
 * An enqueue-only client on the environment's database. Its enqueues reach
 * the workers by a claim; a worker client's own would start the job in its
 * own statement, perhaps before the test has marked where the outbox stood.
 */
const producerOf = (env: CycloneTestEnv) => createEnv({ workflows, runWorkers: false, databaseUrl: env.databaseUrl, isolate: false });

/** Turns dispatch on for the environment's database, as a client with the dispatch option does. */
async function dispatchOn(env: CycloneTestEnv): Promise<void> {
  await sql(env, `INSERT INTO cyclone_dispatch (shards, active_until) VALUES (1, now() + interval '1 hour')`);
}

/** The newest outbox row's id: rows written after it are a path's. */
async function outboxMark(env: CycloneTestEnv): Promise<number> {
  const [{ id }] = await sql<{ id: string }>(env, 'SELECT coalesce(max(id), 0) AS id FROM cyclone_outbox');
  return Number(id);
}

interface WrittenRow {
  runId: string;
  /** The node of the step the row names (null: the row names no step). */
  nodeId: string | null;
  dueAt: Date;
  /** due_at equals the step's scheduled_at, to the microsecond. */
  dueAtIsScheduledAt: boolean;
  /** queue, kind, node_type and priority are the step's. */
  describesStep: boolean;
}

/** The outbox rows written after `mark`, oldest first, each with the step it names. */
async function rowsSince(env: CycloneTestEnv, mark: number): Promise<WrittenRow[]> {
  const rows = await sql<{
    run_id: string;
    node_id: string | null;
    due_at: Date;
    due_at_is_scheduled_at: boolean | null;
    describes_step: boolean | null;
  }>(
    env,
    `SELECT o.run_id, s.node_id, o.due_at, o.due_at = s.scheduled_at AS due_at_is_scheduled_at,
            (o.queue, o.kind, o.node_type, o.priority) IS NOT DISTINCT FROM (s.queue, s.kind, s.node_type, s.priority) AS describes_step
       FROM cyclone_outbox o LEFT JOIN cyclone_steps s ON s.run_id = o.run_id AND s.id = o.step_id
      WHERE o.id > $1
      ORDER BY o.id`,
    [mark],
  );
  return rows.map((r) => ({
    runId: r.run_id,
    nodeId: r.node_id,
    dueAt: r.due_at,
    dueAtIsScheduledAt: r.due_at_is_scheduled_at === true,
    describesStep: r.describes_step === true,
  }));
}

/**
 * Expects the outbox rows written after `mark` to be one for each of
 * `steps` (run id, node id), in any order, and none for any other step;
 * each names its step as it stands, due at its scheduled_at.
 */
async function expectRowsFor(env: CycloneTestEnv, mark: number, steps: [runId: string, nodeId: string][]): Promise<WrittenRow[]> {
  const rows = await rowsSince(env, mark);
  const key = ([runId, nodeId]: [string, string | null]) => `${runId}/${nodeId}`;
  expect(rows.map((r) => key([r.runId, r.nodeId])).sort()).toEqual(steps.map(key).sort());
  for (const row of rows) expect(row).toMatchObject({ dueAtIsScheduledAt: true, describesStep: true });
  return rows;
}

/** A standalone job's step: its node id is its kind. */
const job = (runId: string, kind: string): [string, string] => [runId, kind];

/** The state and scheduled_at of a run's node, straight from the table. */
async function stepRow(env: CycloneTestEnv, runId: string, nodeId: string) {
  const [row] = await sql<{ state: string; attempt: number; scheduled_at: Date }>(
    env,
    'SELECT state, attempt, scheduled_at FROM cyclone_steps WHERE run_id = $1 AND node_id = $2',
    [runId, nodeId],
  );
  return row;
}

/** Waits until the run's node is in `state` (and, given, at `attempt`). */
function nodeWhen(env: CycloneTestEnv, runId: string, nodeId: string, state: string, attempt?: number) {
  return waitFor(`node ${nodeId} of run ${runId} to be ${state}${attempt ? ` at attempt ${attempt}` : ''}`, async () => {
    const row = await stepRow(env, runId, nodeId);
    return row && row.state === state && (attempt === undefined || row.attempt === attempt) ? row : undefined;
  });
}

/** Expects a row to be due about an hour from now (a delay, a backoff, a snooze of an hour). */
function expectDueInAnHour(row: WrittenRow): void {
  expect(row.dueAt.getTime()).toBeGreaterThan(Date.now() + HOUR - 5 * 60_000);
  expect(row.dueAt.getTime()).toBeLessThan(Date.now() + HOUR + 60_000);
}

/** A connection of its own, as psql or another language's driver would hold. */
async function connect(env: CycloneTestEnv): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: env.databaseUrl, application_name: 'cyclone-test' });
  await client.connect();
  return client;
}

/** A second client on the environment's database, closed before this returns whatever happens. */
async function withReplica<T>(
  env: CycloneTestEnv,
  options: Parameters<typeof CycloneTestEnv.create>[0],
  use: (replica: CycloneTestEnv, close: () => Promise<void>) => Promise<T>,
): Promise<T> {
  const replica = await CycloneTestEnv.create({ providers, workflows, databaseUrl: env.databaseUrl, isolate: false, ...options });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await replica.close();
  };
  try {
    return await use(replica, close);
  } finally {
    probe.releaseAll();
    await close();
  }
}

class Rollback extends Error {}

describe('the outbox row of every write that makes a step available (dispatch on)', () => {
  it('enqueue', async () => {
    const env = await idleEnv();
    await dispatchOn(env);
    const mark = await outboxMark(env);
    const runId = await env.client.enqueue('quick', { n: 1 });
    const [row] = await expectRowsFor(env, mark, [job(runId, 'quick')]);
    expect(row.dueAt.getTime()).toBeLessThanOrEqual(Date.now() + 1_000);
  });

  it('enqueue with a delay: the row is due at the step\'s scheduled_at', async () => {
    const env = await idleEnv();
    await dispatchOn(env);
    const mark = await outboxMark(env);
    const processAt = new Date(Date.now() + HOUR);
    const at = await env.client.enqueue('quick', { n: 1 }, { processAt });
    const inAnHour = await env.client.enqueue('quick', { n: 2 }, { processIn: '1h' });
    const rows = await expectRowsFor(env, mark, [job(at, 'quick'), job(inAnHour, 'quick')]);
    expect(rows.find((r) => r.runId === at)!.dueAt).toEqual(processAt);
    expectDueInAnHour(rows.find((r) => r.runId === inAnHour)!);
  });

  it('enqueueTx: the row is written in the caller\'s transaction, and a rollback leaves neither the step nor its row', async () => {
    const env = await idleEnv();
    await dispatchOn(env);
    const mark = await outboxMark(env);

    let committed = '';
    await env.dataSource.transaction(async (manager) => {
      committed = await env.client.enqueueTx(manager, 'quick', { n: 1 });
      // Inside the transaction the row is there; outside it is not yet.
      const [{ n }] = await manager.query('SELECT count(*)::int AS n FROM cyclone_outbox WHERE run_id = $1', [committed]);
      expect(n).toBe(1);
      expect(await rowsSince(env, mark)).toEqual([]);
    });
    await expectRowsFor(env, mark, [job(committed, 'quick')]);

    let rolledBack = '';
    await expect(
      env.dataSource.transaction(async (manager) => {
        rolledBack = await env.client.enqueueTx(manager, 'quick', { n: 2 }, { processIn: '1h' });
        const [{ n }] = await manager.query('SELECT count(*)::int AS n FROM cyclone_outbox WHERE run_id = $1', [rolledBack]);
        expect(n).toBe(1);
        throw new Rollback('the business write failed');
      }),
    ).rejects.toBeInstanceOf(Rollback);
    expect(rolledBack).not.toBe('');
    expect(await sql(env, 'SELECT id FROM cyclone_steps WHERE run_id = $1', [rolledBack])).toEqual([]);
    expect(await sql(env, 'SELECT id FROM cyclone_outbox WHERE run_id = $1', [rolledBack])).toEqual([]);
    await expectRowsFor(env, mark, [job(committed, 'quick')]);
  });

  it('enqueueMany: one row per step', async () => {
    const env = await idleEnv();
    await dispatchOn(env);
    const mark = await outboxMark(env);
    const runIds = await env.client.enqueueMany('quick', [{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect(runIds).toHaveLength(3);
    await expectRowsFor(env, mark, runIds.map((runId) => job(runId, 'quick')));
    const delayed = await env.client.enqueueMany('quick', [{ n: 4 }, { n: 5 }], { processIn: '1h' });
    const rows = await expectRowsFor(env, mark, [...runIds, ...delayed].map((runId) => job(runId, 'quick')));
    for (const row of rows.filter((r) => delayed.includes(r.runId))) expectDueInAnHour(row);
  });

  it('cyclone_enqueue (SQL), committed and rolled back', async () => {
    const env = await idleEnv();
    await dispatchOn(env);
    const mark = await outboxMark(env);
    const psql = await connect(env);
    try {
      const enqueue = async (options: object) =>
        (await psql.query<{ id: string }>(`SELECT cyclone_enqueue('quick', '{"n": 1}'::jsonb, $1::jsonb) AS id`, [JSON.stringify(options)]))
          .rows[0].id;
      const now = await enqueue({});
      const delayed = await enqueue({ processIn: '1h' });
      const rows = await expectRowsFor(env, mark, [job(now, 'quick'), job(delayed, 'quick')]);
      expectDueInAnHour(rows.find((r) => r.runId === delayed)!);

      await psql.query('BEGIN');
      const rolledBack = await enqueue({ priority: 5 });
      const inside = await psql.query('SELECT id FROM cyclone_outbox WHERE run_id = $1', [rolledBack]);
      expect(inside.rows).toHaveLength(1);
      await psql.query('ROLLBACK');
      expect(await sql(env, 'SELECT id FROM cyclone_steps WHERE run_id = $1', [rolledBack])).toEqual([]);
      expect(await sql(env, 'SELECT id FROM cyclone_outbox WHERE run_id = $1', [rolledBack])).toEqual([]);
      await expectRowsFor(env, mark, [job(now, 'quick'), job(delayed, 'quick')]);
    } finally {
      await psql.end();
    }
  });

  it('a DAG workflow\'s start: rows for its first nodes only', async () => {
    const env = await idleEnv();
    await dispatchOn(env);
    const mark = await outboxMark(env);
    const runId = await env.client.start(Fork, {});
    await expectRowsFor(env, mark, [
      [runId, 'a'],
      [runId, 'e'],
    ]);
    // A workflow that starts on a sleep and a signal wait has no step to make available yet.
    const napping = await env.client.start(Nap, {});
    const waiting = await env.client.start(Approval, {});
    expect((await rowsSince(env, mark)).filter((r) => r.runId === napping || r.runId === waiting)).toEqual([]);
  });

  it('the successors a completion releases', async () => {
    const env = await workingEnv();
    await dispatchOn(env);
    const runId = await env.client.start(Relay, {});
    const first = await probe.call(runId, 0);
    const mark = await outboxMark(env);
    first.release('first done');
    const second = await probe.call(runId, 1);
    expect(second.nodeId).toBe('second');
    // The completion of `first` wrote a row for `second` only: none for itself, none for `third`.
    await expectRowsFor(env, mark, [[runId, 'second']]);
    expect(await stepRow(env, runId, 'third')).toMatchObject({ state: 'pending' });
  });

  it('a retry after backoff: the row is due at the retry\'s scheduled_at', async () => {
    const env = await workingEnv();
    await dispatchOn(env);
    const runId = await (await producerOf(env)).client.enqueue('fails_once', {});
    const mark = await outboxMark(env);
    const waiting = await nodeWhen(env, runId, 'fails_once', 'available', 2);
    const [row] = await expectRowsFor(env, mark, [job(runId, 'fails_once')]);
    expect(row.dueAt).toEqual(waiting.scheduled_at);
    expectDueInAnHour(row);
  });

  it('snooze: the row is due when the snooze ends', async () => {
    const env = await workingEnv();
    await dispatchOn(env);
    const runId = await (await producerOf(env)).client.enqueue('snoozes_once', {});
    const mark = await outboxMark(env);
    await waitFor('the snooze', () => firstCalls.has(runId));
    const snoozed = await waitFor('the snoozed step', async () => {
      const row = await stepRow(env, runId, 'snoozes_once');
      return row.state === 'available' && row.scheduled_at.getTime() > Date.now() ? row : undefined;
    });
    expect(snoozed.attempt).toBe(1);
    const [row] = await expectRowsFor(env, mark, [job(runId, 'snoozes_once')]);
    expectDueInAnHour(row);
  });

  it('a fired timer: the step after the sleep gets its row', async () => {
    const env = await idleEnv();
    await dispatchOn(env);
    const mark = await outboxMark(env);
    const runId = await env.client.start(Nap, {});
    await untilStates(env, runId, { nap: 'waiting_timer', after: 'pending' }, 'the sleep');
    expect(await rowsSince(env, mark)).toEqual([]);
    expect(await env.fireTimer(runId, 'nap')).toBeDefined();
    expect(await stepRow(env, runId, 'after')).toMatchObject({ state: 'available' });
    await expectRowsFor(env, mark, [[runId, 'after']]);
  });

  it('a signal: the step after the wait gets its row', async () => {
    const env = await idleEnv();
    await dispatchOn(env);
    const mark = await outboxMark(env);
    const runId = await env.client.start(Approval, {});
    await untilStates(env, runId, { approval: 'waiting_signal', after: 'pending' }, 'the signal wait');
    expect(await rowsSince(env, mark)).toEqual([]);
    expect(await env.client.signal(runId, 'approval', { by: 'ops' })).toBe(true);
    await expectRowsFor(env, mark, [[runId, 'after']]);
  });

  it('resume of a paused run: its steps get their rows again, a delayed one due at its scheduled_at', async () => {
    const env = await idleEnv();
    await dispatchOn(env);
    const flow = await env.client.start(Fork, {});
    const delayed = await env.client.enqueue('quick', {}, { processIn: '1h' });
    expect(await env.client.pause(flow)).toBe(true);
    expect(await env.client.pause(delayed)).toBe(true);
    const mark = await outboxMark(env);
    expect(await stepRow(env, flow, 'a')).toMatchObject({ state: 'paused' });

    expect(await env.client.resume(flow)).toBe(true);
    expect(await env.client.resume(delayed)).toBe(true);
    const rows = await expectRowsFor(env, mark, [
      [flow, 'a'],
      [flow, 'e'],
      job(delayed, 'quick'),
    ]);
    expectDueInAnHour(rows.find((r) => r.runId === delayed)!);
  });

  it('retry of a failed run: a row for the node it reopens, none for the others', async () => {
    const env = await workingEnv();
    await dispatchOn(env);
    const runId = await env.client.start(Refused, {});
    (await probe.call(runId, 0)).release(new PermanentError('no'));
    await waitFor('the run to fail', async () => (await env.client.getRun(runId)).state === 'failed');
    const mark = await outboxMark(env);

    await env.client.retry(runId, 'a');
    const again = await probe.call(runId, 1);
    expect(again.nodeId).toBe('a');
    await expectRowsFor(env, mark, [[runId, 'a']]);
  });

  it('retryAll of a failed run: a row for every node it reopens', async () => {
    const env = await workingEnv();
    await dispatchOn(env);
    const runId = await env.client.start(Pair, {});
    const calls = [await probe.call(runId, 0), await probe.call(runId, 1)];
    for (const call of calls) call.release(new PermanentError(`${call.nodeId} refuses`));
    await untilStates(env, runId, { a: 'discarded', b: 'discarded' }, 'both roots to fail');
    await waitFor('the run to fail', async () => (await env.client.getRun(runId)).state === 'failed');
    const mark = await outboxMark(env);

    expect(await env.client.retryAll(runId)).toBe(2);
    await probe.call(runId, 3);
    await expectRowsFor(env, mark, [
      [runId, 'a'],
      [runId, 'b'],
    ]);
  });

  it('runNow of a delayed step: a row due now', async () => {
    const env = await idleEnv();
    await dispatchOn(env);
    const runId = await env.client.enqueue('quick', {}, { processIn: '1h' });
    const mark = await outboxMark(env);
    expect(await env.client.runNow(runId, 'quick')).toBe(true);
    const [row] = await expectRowsFor(env, mark, [job(runId, 'quick')]);
    expect(row.dueAt.getTime()).toBeLessThanOrEqual(Date.now() + 1_000);
    // Due already: nothing changes, no row.
    expect(await env.client.runNow(runId, 'quick')).toBe(false);
    await expectRowsFor(env, mark, [job(runId, 'quick')]);
  });

  it('a hand-back at shutdown', async () => {
    const env = await idleEnv();
    await dispatchOn(env);
    const runId = await env.client.enqueue('held', {});
    await withReplica(env, { workers: 1, shutdownTimeout: 200 }, async (_replica, close) => {
      await probe.call(runId);
      const mark = await outboxMark(env);
      // The handler ignores its signal: past shutdownTimeout its step is handed back.
      await close();
      expect(await stepRow(env, runId, 'held')).toMatchObject({ state: 'available', attempt: 1 });
      await expectRowsFor(env, mark, [job(runId, 'held')]);
    });
  });

  it('a reclaimed lease', async () => {
    const env = await createEnv({ workflows, runWorkers: false, pollInterval: POLLING_OFF });
    await firstPollTick(env);
    await dispatchOn(env);
    const runId = await env.client.enqueue('held', {});
    const mark = await outboxMark(env);
    expect(await claimAsDeadWorker(env, ['held'], { leaseTtlMs: 1 })).toHaveLength(1);
    await untilRunningStepsLapse(env);
    expect(await env.app.get(RecoverySweeper).sweep()).toEqual(['reclaimed']);
    expect(await stepRow(env, runId, 'held')).toMatchObject({ state: 'available', attempt: 1 });
    await expectRowsFor(env, mark, [job(runId, 'held')]);
  });

  it('resumeQueue: the queue\'s available steps that have no row get one', async () => {
    const env = await idleEnv();
    await dispatchOn(env);
    const now = await env.client.enqueue('quick', { n: 1 });
    const delayed = await env.client.enqueue('quick', { n: 2 }, { processIn: '1h' });
    const elsewhere = await env.client.enqueue('stranded', { n: 3 });
    const pausedRun = await env.client.enqueue('quick', { n: 4 });
    expect(await env.client.pause(pausedRun)).toBe(true);

    expect(await env.client.pauseQueue('default')).toBe(true);
    // A publisher took the queue's rows meanwhile, and its workers dropped the messages of the paused queue.
    await sql(env, `DELETE FROM cyclone_outbox WHERE queue = 'default'`);
    const mark = await outboxMark(env);
    expect(await env.client.resumeQueue('default')).toBe(true);
    // Not the other queue's step (its row is still there), not the paused run's (it gets one at resume).
    const rows = await expectRowsFor(env, mark, [job(now, 'quick'), job(delayed, 'quick')]);
    expectDueInAnHour(rows.find((r) => r.runId === delayed)!);
    expect(await sql(env, 'SELECT id FROM cyclone_outbox WHERE run_id = $1', [elsewhere])).toHaveLength(1);

    // Not paused: nothing to resume, nothing written.
    expect(await env.client.resumeQueue('default')).toBe(false);
    await expectRowsFor(env, mark, [job(now, 'quick'), job(delayed, 'quick')]);
  });

  it('a code workflow\'s start', async () => {
    const env = await idleEnv();
    await dispatchOn(env);
    const mark = await outboxMark(env);
    const runId = await env.client.start('greeting', { name: 'ann' });
    await expectRowsFor(env, mark, [[runId, 'greeting']]);
  });

  it('a code workflow\'s step, and its wake-up once the step completes', async () => {
    const env = await workingEnv();
    await dispatchOn(env);
    const mark = await outboxMark(env);
    const runId = await env.client.start('greeting', { name: 'ann' });
    const greet = await probe.call(runId);
    expect(greet.nodeId).toBe('greet');
    await untilStates(env, runId, { greeting: 'pending' }, 'the method to wait on its step');
    await expectRowsFor(env, mark, [
      [runId, 'greeting'],
      [runId, 'greet'],
    ]);

    const woken = await outboxMark(env);
    greet.release('hello ann');
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ greeted: 'hello ann' });
    await expectRowsFor(env, woken, [[runId, 'greeting']]);
  });

  it('control: a claim, a completion, a final failure, a cancel and a pause write no row', async () => {
    const env = await workingEnv();
    await dispatchOn(env);
    const producer = await producerOf(env);
    const completes = await producer.client.enqueue('held', { n: 1 });
    const fails = await producer.client.enqueue('held', { n: 2 });
    const cancelled = await producer.client.enqueue('quick', {}, { processIn: '1h' });
    const paused = await producer.client.enqueue('quick', {}, { processIn: '1h' });
    const mark = await outboxMark(env);

    // Claimed: running, no row.
    const [completing, failing] = [await probe.call(completes), await probe.call(fails)];
    expect(await rowsSince(env, mark)).toEqual([]);
    completing.release('done');
    failing.release(new PermanentError('final'));
    await expect(env.client.result(completes, { timeout: 10_000 })).resolves.toBe('done');
    await nodeWhen(env, fails, 'held', 'discarded');
    expect(await env.client.cancel(cancelled)).toBe(true);
    expect(await env.client.pause(paused)).toBe(true);
    expect(await rowsSince(env, mark)).toEqual([]);
    // One row each, from their enqueue.
    const [{ n }] = await sql<{ n: number }>(env, 'SELECT count(*)::int AS n FROM cyclone_outbox');
    expect(n).toBe(4);
  });
});

describe('with dispatch off no path writes a row', () => {
  it.each([
    ['no cyclone_dispatch row', null],
    ['a cyclone_dispatch row whose active_until has passed', `now() - interval '1 second'`],
  ])('%s', async (_name, activeUntil) => {
    retryAfterMs = 10;
    snoozeMs = 10;
    const env = await workingEnv();
    if (activeUntil) await sql(env, `INSERT INTO cyclone_dispatch (shards, active_until) VALUES (1, ${activeUntil})`);
    const results: Promise<unknown>[] = [];
    const finish = (runId: string) => results.push(env.client.result(runId, { timeout: 20_000 }));

    // Enqueues: the client's, delayed (then run now), many, in a transaction, from SQL.
    finish(await env.client.enqueue('quick', {}));
    const delayed = await env.client.enqueue('quick', {}, { processIn: '1h' });
    expect(await env.client.runNow(delayed, 'quick')).toBe(true);
    finish(delayed);
    for (const runId of await env.client.enqueueMany('quick', [{ n: 1 }, { n: 2 }])) finish(runId);
    finish(await env.dataSource.transaction((manager) => env.client.enqueueTx(manager, 'quick', {})));
    finish((await sql<{ id: string }>(env, `SELECT cyclone_enqueue('quick', '{}'::jsonb) AS id`))[0].id);
    // A workflow's start and successors, a retry after backoff, a snooze, a fired timer, a signal.
    finish(await env.client.start(QuickChain, {}));
    finish(await env.client.enqueue('fails_once', {}));
    finish(await env.client.enqueue('snoozes_once', {}));
    finish(await env.client.start(QuickNap, {}));
    const approval = await env.client.start(QuickApproval, {});
    await untilStates(env, approval, { approval: 'waiting_signal' }, 'the signal wait');
    expect(await env.client.signal(approval, 'approval', {})).toBe(true);
    finish(approval);
    // Pause and resume.
    const paused = await env.client.enqueue('quick', {}, { processIn: '1h' });
    await env.client.pause(paused);
    await env.client.resume(paused);
    await env.client.runNow(paused, 'quick');
    finish(paused);
    // retry and retryAll.
    const refused = await env.client.start(RefusedOnce, {});
    await waitFor('the run to fail', async () => {
      const states = await env.client.listSteps(refused);
      return states.every((s) => s.state === 'discarded') && (await env.client.getRun(refused)).state === 'failed';
    });
    await env.client.retry(refused, 'a');
    await nodeWhen(env, refused, 'a', 'completed');
    expect(await env.client.retryAll(refused)).toBe(1);
    finish(refused);
    // A paused queue resumed.
    await env.client.pauseQueue('default');
    const queued = await env.client.enqueue('quick', {});
    await env.client.resumeQueue('default');
    finish(queued);
    // A code workflow: its start, its step, its wake-up.
    const greeting = await env.client.start('greeting', { name: 'bob' });
    (await probe.call(greeting)).release('hello bob');
    finish(greeting);
    await Promise.all(results);

    // A reclaimed lease, then a hand-back at shutdown, on a queue this client does not serve.
    const stranded = await env.client.enqueue('stranded', {});
    expect(await claimAsDeadWorker(env, ['stranded'], { queue: 'stranded' })).toHaveLength(1);
    await untilRunningStepsLapse(env);
    await env.app.get(RecoverySweeper).sweep();
    await nodeWhen(env, stranded, 'stranded', 'available');
    await withReplica(env, { queues: { stranded: { workers: 1 } }, shutdownTimeout: 200 }, async (_replica, close) => {
      await probe.call(stranded, 0);
      await close();
    });
    await nodeWhen(env, stranded, 'stranded', 'available');

    expect(await sql(env, 'SELECT * FROM cyclone_outbox')).toEqual([]);
  });
});
