import { describe, it, expect, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import pg from 'pg';
import {
  CycloneDatabase,
  CycloneError,
  DuplicateError,
  InvalidInputError,
  Step,
  defineWorkflow,
  type EnqueueOptions,
  type StepContext,
} from 'cyclone-nestjs';
import { CycloneTestEnv, TestDatabase } from 'cyclone-nestjs/testing';
import { countRows, expectCycloneError } from './support/e2e-helpers.js';
import { HandlerProbe, POLLING_OFF, type HandlerCall, firstPollTick, lastTickAt, stepOf, testEnvs, within } from './support/handler-probe.js';
import { execute, type Statement } from '../libs/cyclone/src/database/statement.js';
import { COMPLETE_STEPS } from '../libs/cyclone/src/sql/complete.sql.js';
import { testServerUrl } from './support/nest-app-harness.js';
import { waitFor } from './support/wait.js';
import { backendPid, sql, untilBlockedBy } from './support/sql.js';

/**
 * What users rely on now that the hot paths batch: concurrent enqueues share
 * an INSERT, wake-ups go out after commit (coalesced), and one client's
 * completions share a statement. Every caller still gets its own outcome.
 */

const probe = new HandlerProbe();
/** Worker clock when an `echo` handler was entered, by run id. */
const echoStarted = new Map<string, number>();

/** Step defaults of `shout`, which a job without options must get whatever its neighbours in the batch asked for. */
const SHOUT = { queue: 'beta', priority: 7, maxAttempts: 3, timeoutMs: 45_000, maxReclaims: 2 };

@Injectable()
class BatchSteps {
  @Step('echo')
  async echo(input: unknown, ctx: StepContext) {
    echoStarted.set(ctx.runId, Date.now());
    return { kind: ctx.kind, runId: ctx.runId, input };
  }

  @Step('shout', {
    queue: SHOUT.queue,
    priority: SHOUT.priority,
    maxAttempts: SHOUT.maxAttempts,
    timeout: SHOUT.timeoutMs,
    maxReclaims: SHOUT.maxReclaims,
  })
  async shout(input: unknown, ctx: StepContext) {
    return { kind: ctx.kind, runId: ctx.runId, input };
  }

  /** The join of `fan`: what its upstreams returned, as it sees them. */
  @Step('gather')
  async gather(input: unknown, ctx: StepContext) {
    return { input, upstream: Object.fromEntries(FAN_NODES.map((id) => [id, ctx.upstream(id)])) };
  }

  /** Runs until the test releases it, and returns what it is released with. */
  @Step('held')
  async held(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }
}

/** Parallel nodes, then a join: several nodes of one run finish together. */
const FAN_NODES = ['p1', 'p2', 'p3'];
const Fan = defineWorkflow<{ run: number }>('fan')
  .step('p1', 'held')
  .step('p2', 'held')
  .step('p3', 'held')
  .step('join', 'gather', { after: FAN_NODES });

const { createEnv, replicaOf } = testEnvs([BatchSteps], probe);

/** How soon a woken worker must start a job. Generous for a busy 2-core machine; without a wake-up it would be a minute. */
const QUICK_MS = 3_000;

type QueryCall = [stmt: Statement, params: readonly unknown[]];

/** Records the statements `env` runs from now on; `restore()` stops recording and keeps what was recorded. */
function recordStatements(env: CycloneTestEnv) {
  const spy = jest.spyOn(env.app.get(CycloneDatabase), 'query');
  let calls: QueryCall[] | undefined;
  return {
    /** The values of each recorded statement with this prepared-statement name. */
    named: (name: string) =>
      (calls ?? (spy.mock.calls as QueryCall[])).filter(([stmt]) => stmt.name === name).map(([, params]) => params as unknown[][]),
    restore: () => {
      calls ??= [...(spy.mock.calls as QueryCall[])];
      spy.mockRestore();
    },
  };
}

describe('concurrent enqueues from one client', () => {
  it('200 concurrent enqueues of mixed kinds and options each get their own run, with exactly their own options and input', async () => {
    const MODULE_MAX_RECLAIMS = 9;
    const MODULE_RETENTION_MS = 3 * 24 * 3_600_000;
    const producer = await createEnv({ runWorkers: false, maxReclaims: MODULE_MAX_RECLAIMS, retention: MODULE_RETENTION_MS });
    const queues = ['default', 'alpha', 'beta'];
    const base = Date.now();

    const jobs = Array.from({ length: 200 }, (_, i) => {
      const kind = i % 2 === 0 ? 'echo' : 'shout';
      const input = { n: i, tag: `job-${i}`, nested: { even: i % 2 === 0, list: Array.from({ length: i % 5 }, (_, k) => k * i) } };
      // Every seventh job leaves everything to the step's and the module's defaults.
      const opts: EnqueueOptions =
        i % 7 === 3
          ? {}
          : {
              queue: queues[i % 3],
              priority: i - 100,
              maxAttempts: 1 + (i % 20),
              timeout: 10_000 + i,
              maxReclaims: i,
              retention: 3_600_000 + i,
              ...(i % 5 === 0 ? { processAt: new Date(base - 1_000 * (i + 1)) } : { processIn: (i % 6) * 50 }),
            };
      const shout = kind === 'shout';
      const expected = {
        queue: opts.queue ?? (shout ? SHOUT.queue : 'default'),
        priority: opts.priority ?? (shout ? SHOUT.priority : 0),
        maxAttempts: opts.maxAttempts ?? (shout ? SHOUT.maxAttempts : 5),
        timeoutMs: (opts.timeout as number | undefined) ?? (shout ? SHOUT.timeoutMs : null),
        maxReclaims: opts.maxReclaims ?? (shout ? SHOUT.maxReclaims : MODULE_MAX_RECLAIMS),
        retentionMs: (opts.retention as number | undefined) ?? MODULE_RETENTION_MS,
        processAt: opts.processAt ?? null,
        processInMs: (opts.processIn as number | undefined) ?? 0,
      };
      return { kind, input, opts, expected };
    });

    const statements = recordStatements(producer);
    let ids: string[];
    try {
      ids = await Promise.all(jobs.map((j) => producer.client.enqueue(j.kind, j.input, j.opts)));
    } finally {
      statements.restore();
    }
    // The burst did share statements (otherwise this test would not be testing batching), and no job was sent twice.
    const inserts = statements.named('cyclone_enqueue_jobs');
    expect(inserts.some((values) => values[0].length > 1)).toBe(true);
    expect(inserts.reduce((sum, values) => sum + values[0].length, 0)).toBe(jobs.length);

    expect(new Set(ids).size).toBe(jobs.length);
    expect(await countRows(producer)).toEqual({ runs: jobs.length, steps: jobs.length });

    const retention = new Map(
      (
        await sql<{ id: string; retention_ms: string }>(
          producer,
          `SELECT id, (extract(epoch FROM retention) * 1000)::bigint AS retention_ms FROM cyclone_runs`,
        )
      ).map((r) => [r.id, Number(r.retention_ms)]),
    );

    for (const [i, job] of jobs.entries()) {
      const runId = ids[i];
      const run = await producer.client.getRun(runId);
      expect(run).toMatchObject({ id: runId, kind: job.kind, state: 'running', queue: job.expected.queue, input: job.input, uniqueKey: null });
      const step = await stepOf(producer, runId);
      expect(step).toMatchObject({
        runId,
        nodeId: job.kind,
        kind: job.kind,
        state: 'available',
        queue: job.expected.queue,
        priority: job.expected.priority,
        attempt: 1,
        maxAttempts: job.expected.maxAttempts,
        reclaims: 0,
        maxReclaims: job.expected.maxReclaims,
        timeoutMs: job.expected.timeoutMs,
        startedAt: null,
        output: null,
      });
      // scheduled_at and created_at come from the same transaction's clock.
      const scheduledAt = job.expected.processAt?.getTime() ?? run.createdAt.getTime() + job.expected.processInMs;
      expect(step.scheduledAt.getTime()).toBe(scheduledAt);
      expect(retention.get(runId)).toBe(job.expected.retentionMs);
    }

    // Run them all: each handler gets its own run's input.
    const worker = await replicaOf(producer, {
      queues: { default: { workers: 4 }, alpha: { workers: 4 }, beta: { workers: 4 } },
    });
    const outputs = await Promise.all(ids.map((id) => worker.client.result(id, { timeout: 20_000 })));
    expect(outputs).toEqual(jobs.map((j, i) => ({ kind: j.kind, runId: ids[i], input: j.input })));
    expect(await countRows(producer)).toEqual({ runs: jobs.length, steps: jobs.length });
  });

  it('a job the database refuses fails only its own caller, with the database\'s words; the rest of the burst is written and runs', async () => {
    const env = await createEnv({ workers: 4 });
    // Validation stops every value Cyclone knows the database refuses, so the database is made to refuse
    // one itself: a trigger of the test's, as a constraint of an app's own could.
    const BAD = 37;
    await sql(
      env,
      `CREATE FUNCTION refuse_bad() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF NEW.input->>'n' = '${BAD}' THEN RAISE EXCEPTION 'job ${BAD} refused' USING ERRCODE = '22023'; END IF;
         RETURN NEW;
       END $$;
       CREATE TRIGGER refuse_bad BEFORE INSERT ON cyclone_runs FOR EACH ROW EXECUTE FUNCTION refuse_bad()`,
    );
    const statements = recordStatements(env);
    let settled: PromiseSettledResult<string>[];
    try {
      settled = await Promise.allSettled(
        Array.from({ length: 60 }, (_, i) => env.client.enqueue('echo', { n: i }, { priority: i % 3 })),
      );
    } finally {
      statements.restore();
    }
    // The bad job went out in one statement with others (the case where one job must not fail its neighbours).
    // (Either insert statement: the one that also starts jobs in this client's idle workers takes the same arrays.)
    const withBad = [...statements.named('cyclone_enqueue_jobs'), ...statements.named('cyclone_enqueue_and_start')]
      .filter((values) => (values[2] as string[]).includes(JSON.stringify({ n: BAD })));
    expect(withBad.some((values) => values[0].length > 1)).toBe(true);

    const bad = settled[BAD];
    expect(bad.status).toBe('rejected');
    const reason = (bad as PromiseRejectedResult).reason as InvalidInputError;
    expect(reason).toBeInstanceOf(InvalidInputError);
    expect(reason.message).toContain(`job ${BAD} refused`);
    expect((reason.cause as { code?: string }).code).toBe('22023');

    const good = settled.flatMap((s, i) => (i === BAD ? [] : [{ n: i, s }]));
    expect(good.filter(({ s }) => s.status !== 'fulfilled')).toEqual([]);
    const goodIds = good.map(({ s }) => (s as PromiseFulfilledResult<string>).value);
    expect(new Set(goodIds).size).toBe(goodIds.length);

    // Nothing of the bad job was written; every other job exists once.
    expect(await countRows(env)).toEqual({ runs: goodIds.length, steps: goodIds.length });
    const badRows = await sql(env, `SELECT id FROM cyclone_runs WHERE input->>'n' = $1`, [String(BAD)]);
    expect(badRows).toEqual([]);

    const outputs = await Promise.all(goodIds.map((id) => env.client.result(id, { timeout: 20_000 })));
    expect(outputs).toEqual(good.map(({ n }, k) => ({ kind: 'echo', runId: goodIds[k], input: { n } })));

    // The client keeps enqueueing normally afterwards.
    const after = await env.client.enqueue('echo', { n: 'after' });
    await expect(env.client.result(after, { timeout: 10_000 })).resolves.toEqual({ kind: 'echo', runId: after, input: { n: 'after' } });
  });

  it('an input jsonb cannot store (a string cut in the middle of an emoji) is refused before the burst is written, naming where', async () => {
    const env = await createEnv({ workers: 4 });
    // A lone high surrogate: JSON.stringify escapes it, and jsonb refuses the escape.
    const cut = { note: '😀 launch'.slice(0, 1) };
    await expect(sql(env, 'SELECT $1::jsonb AS j', [JSON.stringify(cut)])).rejects.toThrow();

    const BAD = 11;
    const settled = await Promise.allSettled(
      Array.from({ length: 30 }, (_, i) => env.client.enqueue('echo', i === BAD ? cut : { n: i })),
    );
    const bad = settled[BAD];
    expect(bad.status).toBe('rejected');
    const reason = (bad as PromiseRejectedResult).reason as CycloneError;
    expect(reason).toBeInstanceOf(InvalidInputError);
    expect(reason.message).toContain('$.note contains half of a character');

    const goodIds = settled.flatMap((s, i) => (i === BAD ? [] : [(s as PromiseFulfilledResult<string>).value]));
    expect(settled.filter((s, i) => i !== BAD && s.status !== 'fulfilled')).toEqual([]);
    expect(await countRows(env)).toEqual({ runs: goodIds.length, steps: goodIds.length });
    const outputs = await Promise.all(goodIds.map((id) => env.client.result(id, { timeout: 20_000 })));
    expect(outputs.map((o) => (o as { input: unknown }).input)).toEqual(
      Array.from({ length: 30 }, (_, i) => i).filter((i) => i !== BAD).map((n) => ({ n })),
    );
  });

  it('a unique enqueue racing non-unique ones: the second holder of the key still gets DuplicateError', async () => {
    const env = await createEnv({ runWorkers: false });
    const KEY = 'order-42';
    const plain = (n: number) => env.client.enqueue('echo', { n });
    const unique = (who: string) => env.client.enqueue('echo', { who }, { unique: KEY });
    const burst = [
      ...Array.from({ length: 15 }, (_, i) => plain(i)),
      unique('first'),
      ...Array.from({ length: 15 }, (_, i) => plain(100 + i)),
      unique('second'),
      ...Array.from({ length: 15 }, (_, i) => plain(200 + i)),
    ];
    const settled = await Promise.allSettled(burst);
    const uniqueAt = [15, 31];
    const plainResults = settled.filter((_, i) => !uniqueAt.includes(i));
    expect(plainResults.every((s) => s.status === 'fulfilled')).toBe(true);
    const plainIds = plainResults.map((s) => (s as PromiseFulfilledResult<string>).value);

    const [a, b] = uniqueAt.map((i) => settled[i]);
    const won = [a, b].filter((s): s is PromiseFulfilledResult<string> => s.status === 'fulfilled');
    const lost = [a, b].filter((s): s is PromiseRejectedResult => s.status === 'rejected');
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    const holder = won[0].value;
    expect(lost[0].reason).toBeInstanceOf(DuplicateError);
    expect(lost[0].reason).toMatchObject({ code: 'duplicate', runId: holder, uniqueKey: KEY });

    expect(new Set([...plainIds, holder]).size).toBe(plainIds.length + 1);
    expect((await env.client.getRun(holder)).uniqueKey).toBe(KEY);
    for (const id of plainIds) expect((await env.client.getRun(id)).uniqueKey).toBeNull();
    expect(await countRows(env)).toEqual({ runs: plainIds.length + 1, steps: plainIds.length + 1 });

    // Later, mixed in with another burst, the key is still held.
    const [later, ...rest] = await Promise.allSettled([unique('third'), ...Array.from({ length: 5 }, (_, i) => plain(300 + i))]);
    expect(rest.every((s) => s.status === 'fulfilled')).toBe(true);
    expect(later.status).toBe('rejected');
    const error = await expectCycloneError(Promise.reject((later as PromiseRejectedResult).reason), DuplicateError, 'duplicate');
    expect(error.runId).toBe(holder);
    expect(await countRows(env)).toEqual({ runs: plainIds.length + 6, steps: plainIds.length + 6 });
  });
});

describe('completions of one client recorded together', () => {
  it('50 handlers released at once all complete with their own outputs; the one whose lease was lost meanwhile is dropped, and its new attempt lands', async () => {
    const N = 50;
    const STALE = 17;
    // One spare slot, so that the reclaimed step runs again (same client, new lease) while the others are held.
    const env = await createEnv({ workers: N + 1 });
    const ids = await Promise.all(Array.from({ length: N }, (_, i) => env.client.enqueue('held', { n: i })));
    const calls = await Promise.all(ids.map((id) => probe.call(id)));

    // The lease of one running step is lost and the step reclaimed; its first handler does not know yet.
    const staleStep = await stepOf(env, ids[STALE]);
    await env.expireLease(ids[STALE], 'held');
    const again = await probe.call(ids[STALE], 1);
    expect(again).toMatchObject({ attempt: 1, reclaims: 1 });
    expect(again.fencingToken).toBeGreaterThan(calls[STALE].fencingToken);

    const statements = recordStatements(env);
    let outputs: unknown[];
    const others = ids.filter((_, i) => i !== STALE);
    try {
      for (const [i, call] of calls.entries()) call.release({ n: i, by: 'first holder' });
      outputs = await Promise.all(others.map((id) => env.client.result(id, { timeout: 15_000 })));
      await Promise.all(calls.map((call) => probe.returned(call)));
    } finally {
      statements.restore();
    }

    // The stale completion went out in one statement with others (the case under test).
    const completions = statements.named('cyclone_complete_steps');
    const carrying = completions.filter((values) =>
      (values[1] as string[]).some((id, k) => id === staleStep.id && values[3][k] === String(calls[STALE].fencingToken)),
    );
    expect(carrying).toHaveLength(1);
    expect(carrying[0][1].length).toBeGreaterThan(1);

    // Every other step completed with its own output; the reclaimed one still runs, its stale completion dropped.
    expect(outputs).toEqual(ids.flatMap((_, i) => (i === STALE ? [] : [{ n: i, by: 'first holder' }])));
    expect((await env.attemptEnded(ids[STALE], { fencingToken: calls[STALE].fencingToken })).outcome).toBe('lease_lost');
    expect(await stepOf(env, ids[STALE])).toMatchObject({ state: 'running', output: null, reclaims: 1, leaseGeneration: again.fencingToken });

    again.release({ n: STALE, by: 'second holder' });
    await expect(env.client.result(ids[STALE], { timeout: 15_000 })).resolves.toEqual({ n: STALE, by: 'second holder' });

    // Nothing runs again afterwards, and each step was written once, by its current holder.
    await env.waitForPasses('cyclone:claim', 2);
    for (const [i, id] of ids.entries()) {
      const step = await stepOf(env, id);
      if (i === STALE) {
        expect(probe.of(id)).toHaveLength(2);
        expect(step).toMatchObject({ state: 'completed', output: { n: i, by: 'second holder' }, attempt: 1, reclaims: 1, leaseGeneration: again.fencingToken });
      } else {
        expect(probe.of(id)).toHaveLength(1);
        expect(step).toMatchObject({ state: 'completed', output: { n: i, by: 'first holder' }, attempt: 1, reclaims: 0, leaseGeneration: calls[i].fencingToken });
      }
    }
    expect(await countRows(env)).toEqual({ runs: N, steps: N });
  });

  it('an output the database refuses fails only its own attempt; the completions released with it complete once, at once', async () => {
    const N = 10;
    const BAD = 4;
    const env = await createEnv({ workers: N });
    // The database refuses outputs marked "poison" (a data exception, as for a value jsonb cannot hold).
    await sql(
      env,
      `CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF NEW.output ? 'poison' THEN RAISE EXCEPTION 'poisoned output' USING ERRCODE = '22023'; END IF;
         RETURN NEW;
       END $$;
       CREATE TRIGGER refuse_poison BEFORE UPDATE OF output ON cyclone_steps
         FOR EACH ROW WHEN (jsonb_typeof(NEW.output) = 'object') EXECUTE FUNCTION refuse_poison();`,
    );
    const ids = await Promise.all(Array.from({ length: N }, (_, i) => env.client.enqueue('held', { n: i }, { maxAttempts: 1 })));
    const calls = await Promise.all(ids.map((id) => probe.call(id)));
    const statements = recordStatements(env);

    for (const [i, call] of calls.entries()) call.release(i === BAD ? { poison: true } : { n: i });
    const others = ids.filter((_, i) => i !== BAD);
    // A completion takes milliseconds; 6 s is generous, and well within the lease TTL (30 s), so no reclaim is involved.
    const outputs = await Promise.all(others.map((id) => env.client.result(id, { timeout: 6_000 })));
    expect(outputs).toEqual(ids.flatMap((_, i) => (i === BAD ? [] : [{ n: i }])));
    for (const [i, id] of ids.entries()) {
      if (i === BAD) continue;
      expect(probe.of(id)).toHaveLength(1);
      expect(await stepOf(env, id)).toMatchObject({ state: 'completed', output: { n: i }, attempt: 1, reclaims: 0 });
    }
    // The refused one is a failed attempt with the reason, like a handler error (one attempt allowed: discarded).
    const refused = await waitFor('condition',async () => {
      const step = await stepOf(env, ids[BAD]);
      return step.state === 'discarded' ? step : undefined;
    });
    expect(refused).toMatchObject({ errorKind: 'error', output: null });
    expect(refused.error).toContain('The output could not be stored: poisoned output');
    statements.restore();
    // It was refused inside a shared statement, which was then split: it went out once more alone.
    const written = statements.named('cyclone_complete_steps').map((values) => values[1] as unknown as string[]);
    expect(written.some((stepIds) => stepIds.length > 1 && stepIds.includes(refused.id))).toBe(true);
    expect(written.some((stepIds) => stepIds.length === 1 && stepIds[0] === refused.id)).toBe(true);
  });

  it('a stale and a fresh completion of the same step in one statement: only the fresh one lands, in either order', async () => {
    const N = 10;
    // Two spare slots, so that the reclaimed steps run again while the others are still held.
    const env = await createEnv({ workers: N + 2 });
    const ids = await Promise.all(Array.from({ length: N }, (_, i) => env.client.enqueue('held', { n: i })));
    const calls = await Promise.all(ids.map((id) => probe.call(id)));
    const [X, Y] = [3, 6];
    const stepIds = [(await stepOf(env, ids[X])).id, (await stepOf(env, ids[Y])).id];
    await env.expireLease(ids[X], 'held');
    await env.expireLease(ids[Y], 'held');
    const againX = await probe.call(ids[X], 1);
    const againY = await probe.call(ids[Y], 1);

    const statements = recordStatements(env);
    try {
      // Everything at once: X's old holder finishes before its new one, Y's after.
      againY.release({ n: Y, by: 'second holder' });
      for (const [i, call] of calls.entries()) call.release({ n: i, by: 'first holder' });
      againX.release({ n: X, by: 'second holder' });
      await Promise.all(ids.map((id) => env.client.result(id, { timeout: 15_000 })));
    } finally {
      statements.restore();
    }
    // Both completions of X and of Y did share a statement.
    for (const stepId of stepIds) {
      const together = statements
        .named('cyclone_complete_steps')
        .filter((values) => (values[1] as string[]).filter((id) => id === stepId).length === 2);
      expect(together).toHaveLength(1);
    }

    for (const [i, id] of ids.entries()) {
      const reclaimed = i === X || i === Y;
      await expect(env.client.output(id, 'held')).resolves.toEqual({ n: i, by: reclaimed ? 'second holder' : 'first holder' });
      expect(await stepOf(env, id)).toMatchObject({ state: 'completed', reclaims: reclaimed ? 1 : 0 });
      expect(probe.of(id)).toHaveLength(reclaimed ? 2 : 1);
    }
  });
  it('parallel nodes of several workflow runs completing in one statement each release their own join, with their own upstream outputs', async () => {
    const RUNS = 4;
    const env = await createEnv({ workers: RUNS * FAN_NODES.length + 2, workflows: [Fan] });
    const runIds = await Promise.all(Array.from({ length: RUNS }, (_, run) => env.client.start(Fan, { run })));
    const calls = await waitFor(
      'every parallel node to start',
      async () => (probe.calls.length === RUNS * FAN_NODES.length ? [...probe.calls] : undefined),
      10_000,
    );
    const stepIds = new Map<string, string>();
    for (const runId of runIds) for (const step of await env.client.listSteps(runId)) stepIds.set(step.id, runId);

    const statements = recordStatements(env);
    let results: unknown[];
    try {
      for (const call of calls) call.release({ from: call.nodeId, of: call.runId });
      results = await Promise.all(runIds.map((id) => env.client.result(id, { timeout: 15_000 })));
    } finally {
      statements.restore();
    }
    // Several nodes of one run went out in one statement (the case under test).
    const sameRunTogether = statements.named('cyclone_complete_steps').some((values) => {
      const runsOf = (values[1] as string[]).map((id) => stepIds.get(id)).filter((r) => r !== undefined);
      return new Set(runsOf).size < runsOf.length;
    });
    expect(sameRunTogether).toBe(true);

    expect(results).toEqual(
      runIds.map((runId, run) => ({
        join: { input: { run }, upstream: Object.fromEntries(FAN_NODES.map((id) => [id, { from: id, of: runId }])) },
      })),
    );
    for (const runId of runIds) {
      const steps = await env.client.listSteps(runId);
      expect(steps.map((s) => [s.nodeId, s.state, s.attempt, s.reclaims])).toEqual(
        [...FAN_NODES, 'join'].map((id) => [id, 'completed', 1, 0]),
      );
      expect(probe.of(runId)).toHaveLength(FAN_NODES.length);
    }
  });
});

describe('writes that wait for rows changed meanwhile', () => {
  it("completes every step of its batch and holds every run's lock, after a run and a step it waited for were changed", async () => {
    const N = 8;
    const env = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF });
    const ids = await Promise.all(Array.from({ length: N }, (_, i) => env.client.enqueue('held', { n: i })));
    // Running, leased to one worker, as a claim leaves them.
    const steps = await sql<{ run_id: string; id: string }>(
      env,
      `UPDATE cyclone_steps SET state = 'running', lease_owner = 'worker-a', lease_generation = 1,
              lease_expiry = now() + interval '1 minute', started_at = now()
        WHERE run_id = ANY ($1::uuid[]) RETURNING run_id, id`,
      [ids],
    );
    steps.sort((a, b) => a.run_id.localeCompare(b.run_id));

    const watcher = new pg.Client({ connectionString: env.databaseUrl });
    const renewer = new pg.Client({ connectionString: env.databaseUrl });
    // Each row looked up by key, as the planner does once the tables have
    // statistics: the plan under which PostgreSQL 18 lost rows after a recheck.
    const completer = new pg.Client({ connectionString: env.databaseUrl });
    const canceller = new pg.Client({ connectionString: env.databaseUrl });
    const clients = [watcher, renewer, completer, canceller];
    await Promise.all(clients.map((c) => c.connect()));
    try {
      await completer.query('SET enable_material = off; SET enable_bitmapscan = off');
      const [completerPid, watcherPid, renewerPid] = await Promise.all([completer, watcher, renewer].map(backendPid));

      // A caller starting to wait for the first run's result, and a heartbeat of the first step: neither committed yet.
      await watcher.query('BEGIN');
      await watcher.query('UPDATE cyclone_runs SET notify_finish = true WHERE id = $1', [steps[0].run_id]);
      await renewer.query('BEGIN');
      await renewer.query(`UPDATE cyclone_steps SET heartbeat_at = now(), lease_expiry = now() + interval '2 minutes'
                            WHERE run_id = $1 AND id = $2`, [steps[0].run_id, steps[0].id]);
      const completion = execute(completer, COMPLETE_STEPS, [
        steps.map((s) => s.run_id),
        steps.map((s) => s.id),
        'worker-a',
        steps.map(() => '1'),
        steps.map((_, i) => JSON.stringify({ n: i })),
      ]);
      await untilBlockedBy(env, watcherPid, completerPid, 'the completion waiting for the first run');
      await watcher.query('COMMIT');
      await untilBlockedBy(env, renewerPid, completerPid, 'the completion waiting for the first step');
      // It holds every run of its batch while it writes: a cancel cannot take one.
      for (const { run_id } of steps) {
        await expect(canceller.query('SELECT 1 FROM cyclone_runs WHERE id = $1 FOR UPDATE NOWAIT', [run_id])).rejects.toMatchObject({
          code: '55P03',
        });
      }
      await renewer.query('COMMIT');

      const { rows } = await completion;
      expect(rows.map((r) => r.id).sort()).toEqual(steps.map((s) => s.id).sort());
      const after = await sql<{ state: string }>(env, 'SELECT state FROM cyclone_steps WHERE run_id = ANY ($1::uuid[])', [ids]);
      expect(after.map((r) => r.state)).toEqual(ids.map(() => 'completed'));
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
  });

  it('a wake-up of several code workflows wakes each of them, after one of their nodes it waited for was changed', async () => {
    const env = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF });
    // Four code workflows suspended on a node that has finished, as a pass leaves them.
    const runs = await sql<{ id: string }>(
      env,
      `INSERT INTO cyclone_runs (id, queue, retention, workflow, version)
       SELECT cyclone_uuid7(), 'default', interval '1 day', 'main', 1 FROM generate_series(1, 4) RETURNING id`,
    );
    const ids = runs.map((r) => r.id).sort();
    await sql(
      env,
      `INSERT INTO cyclone_steps (run_id, node_id, node_type, queue, state, max_attempts, kind, depends_on)
       SELECT id, 'main', 'workflow', 'default', 'pending', 1, 'main', ARRAY['first'] FROM unnest($1::uuid[]) AS id
       UNION ALL
       SELECT id, 'first', 'step', 'default', 'completed', 1, 'echo', '{}' FROM unnest($1::uuid[]) AS id`,
      [ids],
    );
    const changer = new pg.Client({ connectionString: env.databaseUrl });
    const waker = new pg.Client({ connectionString: env.databaseUrl });
    await Promise.all([changer.connect(), waker.connect()]);
    try {
      await waker.query('SET enable_material = off; SET enable_bitmapscan = off');
      const [wakerPid, changerPid] = await Promise.all([waker, changer].map(backendPid));
      await changer.query('BEGIN');
      await changer.query(`UPDATE cyclone_steps SET updated_at = now() WHERE run_id = $1 AND node_id = 'main'`, [ids[0]]);
      const wake = waker.query('SELECT cyclone_wake_workflows($1::uuid[])', [ids]);
      await untilBlockedBy(env, changerPid, wakerPid, 'the wake-up waiting for the first workflow');
      await changer.query('COMMIT');
      await wake;
      const nodes = await sql<{ state: string }>(env, `SELECT state FROM cyclone_steps WHERE run_id = ANY ($1::uuid[]) AND node_id = 'main'`, [ids]);
      expect(nodes.map((n) => n.state)).toEqual(ids.map(() => 'available'));
    } finally {
      await Promise.all([changer.end(), waker.end()]);
    }
  });
});

describe('wake-ups after commit', () => {
  it('enqueues of an enqueue-only client wake another client\'s idle workers at once (its polling is off); so do same-app enqueues and enqueueTx', async () => {
    const worker = await createEnv({ pollInterval: POLLING_OFF, queues: { default: { workers: 4 }, alpha: { workers: 4 } } });
    // Its poll is off too: its sweep must not be what wakes anyone.
    const producer = await replicaOf(worker, { runWorkers: false, pollInterval: POLLING_OFF });
    await firstPollTick(worker);
    await firstPollTick(producer);
    const pollTick = lastTickAt(worker, 'cyclone:poll')!.getTime();

    /** Enqueues one `held` job with `enqueue`, waits for its handler and returns how long it took to start. */
    const startDelay = async (enqueue: () => Promise<string>, n: number): Promise<number> => {
      const before = Date.now();
      const runId = await enqueue();
      const call = await probe.call(runId, 0, 10_000);
      call.release({ n });
      await expect(worker.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ n });
      return call.startedAt - before;
    };

    // From the other client, one job after another.
    for (const n of [1, 2]) {
      expect(await startDelay(() => producer.client.enqueue('held', {}), n)).toBeLessThan(QUICK_MS);
    }
    expect(await startDelay(() => producer.client.enqueue('held', {}, { queue: 'alpha' }), 3)).toBeLessThan(QUICK_MS);

    // A burst from the other client on two queues: the coalesced wake-ups reach both.
    echoStarted.clear();
    const burstAt = Date.now();
    const burst = await Promise.all(
      Array.from({ length: 24 }, (_, i) => producer.client.enqueue('echo', { i }, { queue: i % 2 === 0 ? 'default' : 'alpha' })),
    );
    const outputs = await Promise.all(burst.map((id) => worker.client.result(id, { timeout: 10_000 })));
    expect(outputs).toEqual(burst.map((runId, i) => ({ kind: 'echo', runId, input: { i } })));
    for (const id of burst) expect(echoStarted.get(id)! - burstAt).toBeLessThan(QUICK_MS);

    // enqueueTx from the other client: the wake-up is sent with its commit.
    const inTx = await startDelay(
      () => producer.dataSource.transaction((manager) => producer.client.enqueueTx(manager, 'held', {})),
      4,
    );
    expect(inTx).toBeLessThan(QUICK_MS);

    // The same app's own enqueues start its workers at once too.
    for (const n of [5, 6]) {
      expect(await startDelay(() => worker.client.enqueue('held', {}), n)).toBeLessThan(QUICK_MS);
    }

    // None of this waited for a poll tick.
    expect(lastTickAt(worker, 'cyclone:poll')!.getTime()).toBe(pollTick);
  });
});

describe('graceful shutdown after a burst of completions', () => {
  it('closing waits until the batched completions are written: no step is left running, every returned handler\'s output is recorded', async () => {
    const N = 30;
    const SHUTDOWN_TIMEOUT_MS = 10_000;
    // The database outlives the client, to read what it left behind.
    const database = await TestDatabase.create(testServerUrl());
    let env: CycloneTestEnv | undefined;
    const locker = new pg.Client({ connectionString: database.url, application_name: 'cyclone-test-locker' });
    let lockerConnected = false;
    try {
      env = await CycloneTestEnv.create({
        providers: [BatchSteps],
        databaseUrl: database.url,
        isolate: false,
        workers: N,
        shutdownTimeout: SHUTDOWN_TIMEOUT_MS,
      });
      const ids = await Promise.all(Array.from({ length: N }, (_, i) => env!.client.enqueue('held', { n: i })));
      const calls = await Promise.all(ids.map((id) => probe.call(id)));
      // More jobs than slots: whatever the freed slots pick up before the client stops must be finished or left alone.
      echoStarted.clear();
      const echoes = await Promise.all(Array.from({ length: 10 }, (_, i) => env!.client.enqueue('echo', { i })));

      // Hold the held runs' locks from outside, so their completions are on their way but cannot land yet.
      await locker.connect();
      lockerConnected = true;
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM cyclone_runs WHERE id = ANY ($1::uuid[]) FOR UPDATE', [ids]);

      for (const [i, call] of calls.entries()) call.release({ n: i });
      await Promise.all(calls.map((call) => probe.returned(call)));
      // Every handler has returned, and no completion is written yet.
      const during = await sql<{ state: string }>(database.url, 'SELECT state FROM cyclone_steps WHERE run_id = ANY ($1::uuid[])', [ids]);
      expect(during.map((r) => r.state)).toEqual(ids.map(() => 'running'));

      const closingEnv = env;
      env = undefined;
      const started = Date.now();
      const closed = closingEnv.close().then(() => Date.now() - started);
      expect(await within(closed, 700, 'still closing')).toBe('still closing');

      await locker.query('COMMIT');
      const took = await closed;
      // It waited for the writes, not for the shutdown timeout (nothing was handed back).
      expect(took).toBeLessThan(SHUTDOWN_TIMEOUT_MS);

      const rows = await sql<{ run_id: string; state: string; output: unknown; attempt: number; reclaims: number }>(
        database.url,
        'SELECT run_id, state, output, attempt, reclaims FROM cyclone_steps',
      );
      const byRun = new Map(rows.map((r) => [r.run_id, r]));
      expect(rows.filter((r) => r.state === 'running')).toEqual([]);
      for (const [i, id] of ids.entries()) {
        expect(byRun.get(id)).toMatchObject({ state: 'completed', output: { n: i }, attempt: 1, reclaims: 0 });
      }
      for (const [i, id] of echoes.entries()) {
        // Ran before the client stopped claiming: recorded. Otherwise: untouched, for the next client.
        const expected = echoStarted.has(id)
          ? { state: 'completed', output: { kind: 'echo', runId: id, input: { i } } }
          : { state: 'available', output: null, attempt: 1, reclaims: 0 };
        expect(byRun.get(id)).toMatchObject(expected);
      }
    } finally {
      if (lockerConnected) await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end().catch(() => undefined);
      probe.releaseAll();
      await env?.close();
      await database.drop();
    }
  });
});
