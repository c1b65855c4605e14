import { describe, it, expect } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { PermanentError, Step, type StepAttempt, type StepContext } from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { RecoverySweeper, type RecoveryOutcome } from '../libs/cyclone/src/maintenance/recovery.sweeper.js';
import { RetentionSweeper } from '../libs/cyclone/src/maintenance/retention.sweeper.js';
import { MAX_ERROR_TEXT } from '../libs/cyclone/src/common/storable-text.js';
import { HandlerProbe, POLLING_OFF, claimAsDeadWorker, firstPollTick, ownerOf, stepOf, testEnvs } from './support/handler-probe.js';
import { sql } from './support/sql.js';
import { waitFor } from './support/wait.js';

/**
 * Every attempt of a step is kept (SPEC §19): listSteps gives each step its
 * attempts in order, with the outcome, error, stack and worker of each,
 * whichever path ended it: completion, a failure retried or discarded, a
 * PermanentError, a timeout caught by the worker or by the sweep, a reclaim
 * and the reclaim limit, a cancellation under a running handler, a snooze.
 * Only the last 20 are kept, and retention deletes them with their run.
 */

const probe = new HandlerProbe();
/** Snoozes of each run of `snoozer` so far. */
const snoozes = new Map<string, number>();

function failFlaky(attempt: number): never {
  throw new Error(`flaky attempt ${attempt}`);
}

@Injectable()
class AttemptSteps {
  @Step('flaky', { maxAttempts: 3, backoff: () => 0 })
  async flaky(_input: unknown, ctx: StepContext) {
    if (ctx.attempt < 3) failFlaky(ctx.attempt);
    return 'third time';
  }

  @Step('doomed', { maxAttempts: 2, backoff: () => 0 })
  async doomed(_input: unknown, ctx: StepContext): Promise<never> {
    throw new Error(`doomed attempt ${ctx.attempt}`);
  }

  @Step('bad_address')
  async badAddress(): Promise<never> {
    throw new PermanentError('bad address');
  }

  /** Its first attempt runs past its timeout (and stops when told); the second completes. */
  @Step('slow', { timeout: 300, maxAttempts: 2, backoff: () => 0 })
  async slow(_input: unknown, ctx: StepContext) {
    if (ctx.attempt === 1) return probe.cooperate(ctx);
    return 'in time';
  }

  /** Claimed only by dead workers (`claimAsDeadWorker`) in these tests. */
  @Step('stranded', { timeout: 200, maxAttempts: 3 })
  async stranded(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }

  @Step('held')
  async held(_input: unknown, ctx: StepContext) {
    return probe.cooperate(ctx);
  }

  @Step('snoozer')
  async snoozer(input: { times: number }, ctx: StepContext) {
    const done = snoozes.get(ctx.runId) ?? 0;
    if (done === input.times) return 'awake';
    snoozes.set(ctx.runId, done + 1);
    return ctx.snooze(0);
  }

  @Step('deep_stack', { maxAttempts: 1 })
  async deepStack(): Promise<never> {
    const error = new Error('a stack too long to keep');
    error.stack = `Error: a stack too long to keep\n${'    at frame (file.js:1:1)\n'.repeat(2_000)}\u0000`;
    throw error;
  }
}

const { createEnv, replicaOf } = testEnvs([AttemptSteps], probe);

const sweep = (env: CycloneTestEnv) => env.app.get(RecoverySweeper).sweep();

/** The attempts of a run's only step. */
const attemptsOf = async (env: CycloneTestEnv, runId: string): Promise<StepAttempt[]> => (await stepOf(env, runId)).attempts;

/** Sweeps until a pass settles the step with `outcome`. */
const sweepUntil = (env: CycloneTestEnv, outcome: RecoveryOutcome) =>
  waitFor(`a sweep that settles a step as ${outcome}`, async () => (await sweep(env)).includes(outcome));

function expectOrdered(attempts: StepAttempt[]): void {
  for (const a of attempts) if (a.finishedAt) expect(a.finishedAt.getTime()).toBeGreaterThanOrEqual(a.startedAt.getTime());
  for (let i = 1; i < attempts.length; i++) {
    expect(attempts[i].startedAt.getTime()).toBeGreaterThanOrEqual(attempts[i - 1].finishedAt!.getTime());
  }
}

describe('attempt history', () => {
  it('keeps each failed attempt with its error, stack and worker, then the one that completed', async () => {
    const env = await createEnv();
    const runId = await env.client.enqueue('flaky', null);
    await env.runUntilComplete(runId);
    const attempts = await attemptsOf(env, runId);
    const worker = ownerOf(env);
    expect(attempts).toEqual([
      {
        attempt: 1,
        startedAt: expect.any(Date),
        finishedAt: expect.any(Date),
        outcome: 'retried',
        error: 'flaky attempt 1',
        errorKind: 'error',
        stack: expect.stringMatching(/^Error: flaky attempt 1\n\s+at failFlaky /),
        worker,
      },
      expect.objectContaining({ attempt: 2, outcome: 'retried', error: 'flaky attempt 2', worker }),
      { attempt: 3, startedAt: expect.any(Date), finishedAt: expect.any(Date), outcome: 'completed', worker },
    ]);
    expectOrdered(attempts);

    // A completion writes nothing to the attempts' table: the completing attempt is the step's own row.
    const done = await env.client.enqueueMany('snoozer', Array.from({ length: 20 }, () => ({ times: 0 })));
    await Promise.all(done.map((id) => env.runUntilComplete(id)));
    const [{ n }] = await sql(env, 'SELECT count(*)::int AS n FROM cyclone_attempts WHERE run_id = ANY ($1::uuid[])', [done]);
    expect(n).toBe(0);
    expect((await attemptsOf(env, done[0])).map((a) => a.outcome)).toEqual(['completed']);
  });

  it('a step out of attempts, and one that threw a PermanentError, end discarded', async () => {
    const env = await createEnv();
    const [doomed, permanent] = await Promise.all([env.client.enqueue('doomed', null), env.client.enqueue('bad_address', null)]);
    await Promise.all([env.runUntilComplete(doomed), env.runUntilComplete(permanent)]);
    expect((await attemptsOf(env, doomed)).map(({ attempt, outcome, error }) => ({ attempt, outcome, error }))).toEqual([
      { attempt: 1, outcome: 'retried', error: 'doomed attempt 1' },
      { attempt: 2, outcome: 'discarded', error: 'doomed attempt 2' },
    ]);
    expect(await attemptsOf(env, permanent)).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'discarded', error: 'bad address', errorKind: 'permanent', stack: expect.stringContaining('PermanentError') }),
    ]);
  });

  it('a timeout is timed_out, whether its worker or the sweep caught it', async () => {
    const env = await createEnv();
    const runId = await env.client.enqueue('slow', null);
    await env.runUntilComplete(runId);
    const [late, onTime] = await attemptsOf(env, runId);
    expect(late).toMatchObject({ attempt: 1, outcome: 'timed_out', errorKind: 'timeout', worker: ownerOf(env) });
    // Its worker records it, unless (on a loaded machine) the sweep of its own client gets there first.
    expect(late.error).toMatch(/timed out after (300 ms|00:00:00\.3 \(recovered by the sweep\))/);
    expect(onTime).toMatchObject({ attempt: 2, outcome: 'completed' });

    // A worker that died with the step: its lease is live, but its timeout runs out on the database clock.
    const sweeper = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF });
    await firstPollTick(sweeper);
    const wedged = await sweeper.client.enqueue('stranded', null);
    expect(await claimAsDeadWorker(sweeper, ['stranded'], { leaseTtlMs: 60_000 })).toHaveLength(1);
    await sweepUntil(sweeper, 'timeout');
    expect(await attemptsOf(sweeper, wedged)).toEqual([
      {
        attempt: 1,
        startedAt: expect.any(Date),
        finishedAt: expect.any(Date),
        outcome: 'timed_out',
        error: expect.stringMatching(/^Step timed out after .*recovered by the sweep/),
        errorKind: 'timeout',
        worker: 'dead-worker',
      },
    ]);
  });

  it('a reclaim keeps the attempt number; past maxReclaims the step is discarded; a live worker then completes one', async () => {
    const base = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF });
    await firstPollTick(base);
    const limited = await base.client.enqueue('stranded', null, { maxReclaims: 1, timeout: '1h' });
    expect(await claimAsDeadWorker(base, ['stranded'], { owner: 'worker-a' })).toHaveLength(1);
    await sweepUntil(base, 'reclaimed');
    expect(await claimAsDeadWorker(base, ['stranded'], { owner: 'worker-b' })).toHaveLength(1);
    await sweepUntil(base, 'reclaim_limit');
    expect(await attemptsOf(base, limited)).toEqual([
      { attempt: 1, startedAt: expect.any(Date), finishedAt: expect.any(Date), outcome: 'reclaimed', worker: 'worker-a' },
      {
        attempt: 1,
        startedAt: expect.any(Date),
        finishedAt: expect.any(Date),
        outcome: 'discarded',
        error: 'Lease expired after 1 reclaim(s); maxReclaims is 1',
        errorKind: 'reclaim_limit',
        worker: 'worker-b',
      },
    ]);

    const runId = await base.client.enqueue('snoozer', { times: 0 });
    expect(await claimAsDeadWorker(base, ['snoozer'], { owner: 'worker-a' })).toHaveLength(1);
    await sweepUntil(base, 'reclaimed');
    const live = await replicaOf(base);
    await live.runUntilComplete(runId);
    expect((await attemptsOf(live, runId)).map(({ attempt, outcome, worker }) => ({ attempt, outcome, worker }))).toEqual([
      { attempt: 1, outcome: 'reclaimed', worker: 'worker-a' },
      { attempt: 1, outcome: 'completed', worker: ownerOf(live) },
    ]);
  });

  it('the attempt that runs now has no outcome yet; cancelling its run ends it as cancelled', async () => {
    // A short lease: the handler learns of the cancellation at its next heartbeat.
    const env = await createEnv({ leaseTtl: '600ms' });
    const runId = await env.client.enqueue('held', null);
    const call = await probe.call(runId);
    expect(await attemptsOf(env, runId)).toEqual([
      { attempt: 1, startedAt: expect.any(Date), finishedAt: null, outcome: null, worker: ownerOf(env) },
    ]);
    await env.client.cancel(runId);
    await call.aborted;
    await probe.returned(call);
    expect(await attemptsOf(env, runId)).toEqual([
      { attempt: 1, startedAt: expect.any(Date), finishedAt: expect.any(Date), outcome: 'cancelled', worker: ownerOf(env) },
    ]);
  });

  it('a hand-back at shutdown ends no attempt: the step runs again with the same number', async () => {
    const observer = await createEnv({ runWorkers: false });
    // Closed by the test: its shutdown is what is tested.
    const worker = await CycloneTestEnv.create({ providers: [AttemptSteps], databaseUrl: observer.databaseUrl, isolate: false, shutdownTimeout: 100 });
    const runId = await observer.client.enqueue('stranded', null, { timeout: '1h' });
    await probe.call(runId);
    await worker.close();
    const step = await stepOf(observer, runId);
    expect(step).toMatchObject({ state: 'available', attempt: 1, reclaims: 0 });
    expect(step.attempts).toEqual([]);
  });

  it('a snooze ends an attempt without consuming it; only the last 20 attempts are kept', async () => {
    const env = await createEnv();
    const runId = await env.client.enqueue('snoozer', { times: 24 });
    await env.runUntilComplete(runId);
    const attempts = await attemptsOf(env, runId);
    expect(attempts).toHaveLength(20);
    expect(attempts.map((a) => a.outcome)).toEqual([...Array(19).fill('snoozed'), 'completed']);
    expect(new Set(attempts.map((a) => a.attempt))).toEqual(new Set([1]));
    expectOrdered(attempts);
    const [{ n }] = await sql(env, 'SELECT count(*)::int AS n FROM cyclone_attempts WHERE run_id = $1', [runId]);
    expect(n).toBe(20);
  });

  it('a stack is kept storable and bounded', async () => {
    const env = await createEnv();
    const runId = await env.client.enqueue('deep_stack', null);
    await env.runUntilComplete(runId);
    const [attempt] = await attemptsOf(env, runId);
    expect(attempt.outcome).toBe('discarded');
    expect(attempt.stack!.length).toBeLessThan(MAX_ERROR_TEXT + 100);
    expect(attempt.stack).toMatch(/^Error: a stack too long to keep\n {4}at frame \(file\.js:1:1\)\n/);
    expect(attempt.stack).toMatch(/… \(\d+ more characters\)$/);
  });

  it('retention deletes a run’s attempts with the run', async () => {
    const env = await createEnv();
    const runId = await env.client.enqueue('doomed', null, { retention: 1 });
    await env.runUntilComplete(runId);
    const count = async () => (await sql(env, 'SELECT count(*)::int AS n FROM cyclone_attempts WHERE run_id = $1', [runId]))[0].n;
    expect(await count()).toBe(2);
    await waitFor('retention to delete the run', async () => (await env.app.get(RetentionSweeper).sweep()) > 0 || undefined);
    expect(await count()).toBe(0);
    await expect(env.client.getRun(runId)).rejects.toMatchObject({ code: 'run_not_found' });
  });
});
