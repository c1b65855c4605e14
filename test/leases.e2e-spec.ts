import { describe, it, expect } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import {
  PermanentError,
  RunCancelledError,
  RunFailedError,
  Step,
  StepAbortedError,
  type StepContext,
} from 'cyclone-nestjs';
import type { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { expectCycloneError } from './support/e2e-helpers.js';
import { HandlerProbe, claimAsDeadWorker, stepOf, stepWhen, within, testEnvs } from './support/handler-probe.js';
import { sleep } from './support/wait.js';

const probe = new HandlerProbe();
const BACKOFF_MS = 1_000;

@Injectable()
class LeaseSteps {
  /** Runs until the test releases it, whatever its signal says. */
  @Step('held')
  async held(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }

  /** Gives up (throws its signal's reason) as soon as its signal aborts. */
  @Step('cooperative')
  async cooperative(_input: unknown, ctx: StepContext) {
    return probe.cooperate(ctx);
  }

  @Step('timing_out', { timeout: 250, maxAttempts: 2, backoff: () => BACKOFF_MS })
  async timingOut(_input: unknown, ctx: StepContext) {
    return probe.cooperate(ctx);
  }

  /** Returns, or throws, what the test releases it with. */
  @Step('flaky', { maxAttempts: 2, backoff: () => BACKOFF_MS })
  async flaky(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }

  /** Claimed only by dead workers in these tests. */
  @Step('stranded')
  async stranded(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }
}

const { createEnv, replicaOf } = testEnvs([LeaseSteps], probe);

/** The lease columns of a run's step, read with the database clock beside them. */
async function leaseRow(env: CycloneTestEnv, runId: string) {
  const [row] = await env.dataSource.query(
    `SELECT state, reclaims, lease_owner, lease_generation::int AS generation, heartbeat_at, lease_expiry,
            lease_expiry > now() AS live,
            (extract(epoch FROM lease_expiry - heartbeat_at) * 1000)::int AS renewed_for_ms
       FROM cyclone_steps WHERE run_id = $1`,
    [runId],
  );
  return row as {
    state: string;
    reclaims: number;
    lease_owner: string | null;
    generation: number;
    heartbeat_at: Date;
    lease_expiry: Date | null;
    live: boolean;
    renewed_for_ms: number;
  };
}

function expectAborted(reason: unknown, why: StepAbortedError['reason'], runId?: string): void {
  expect(reason).toBeInstanceOf(StepAbortedError);
  expect((reason as StepAbortedError).reason).toBe(why);
  expect((reason as StepAbortedError).code).toBe(`step_${why}`);
  if (runId) expect((reason as StepAbortedError).runId).toBe(runId);
}

const failureOf = (env: CycloneTestEnv, runId: string) =>
  expectCycloneError(env.client.result(runId, { timeout: 10_000 }), RunFailedError, 'run_failed');

describe('heartbeats', () => {
  it('with leaseTtl 300 ms a handler that runs ~2 s executes exactly once and completes; heartbeats keep its lease in the future', async () => {
    // The sweep runs every 50-200 ms here: a lease left to lapse would be reclaimed at once.
    const env = await createEnv({ leaseTtl: 300, workers: 1 });
    const runId = await env.client.enqueue('held', {});
    const call = await probe.call(runId);

    const samples: Awaited<ReturnType<typeof leaseRow>>[] = [];
    const until = call.startedAt + 2_000;
    while (Date.now() < until) {
      samples.push(await leaseRow(env, runId));
      await sleep(40);
    }
    call.release({ ran: 'once' });
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ ran: 'once' });

    // About six TTLs went by: the lease was renewed all along and never lapsed.
    for (const s of samples) {
      expect(s).toMatchObject({ state: 'running', reclaims: 0, live: true, generation: 1 });
      // Each renewal moves the expiry exactly one TTL past the renewal, on the database clock.
      expect(s.renewed_for_ms).toBe(300);
    }
    const beats = [...new Set(samples.map((s) => s.heartbeat_at.getTime()))];
    // One renewal every ~100 ms would be ~20; allow for a busy machine.
    expect(beats.length).toBeGreaterThanOrEqual(6);
    expect(beats).toEqual([...beats].sort((a, b) => a - b));
    expect(beats[beats.length - 1] - beats[0]).toBeGreaterThan(1_000);

    expect(probe.of(runId)).toHaveLength(1);
    expect(call.abortedAt).toBeUndefined();
    expect(await stepOf(env, runId)).toMatchObject({ state: 'completed', attempt: 1, reclaims: 0, leaseGeneration: 1, error: null });
  });
});

describe('fencing', () => {
  it('ctx.fencingToken is the lease generation, grows when the step is claimed again, and the old holder\'s late completion is dropped', async () => {
    // A long TTL: the old holder does not learn of the reclaim before it completes.
    const env = await createEnv({ leaseTtl: 3_000, workers: 2 });
    const runId = await env.client.enqueue('held', {});
    const first = await probe.call(runId, 0);
    const before = await stepOf(env, runId);
    expect(before.state).toBe('running');
    expect(first.fencingToken).toBe(before.leaseGeneration);

    await env.expireLease(runId, 'held');
    const second = await probe.call(runId, 1);
    const during = await stepOf(env, runId);
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken);
    expect(second.fencingToken).toBe(during.leaseGeneration);
    expect(second).toMatchObject({ attempt: 1, reclaims: 1 });
    // Same process, so the same lease owner: only the generation tells the two holders apart.
    expect(during.leaseOwner).toBe(before.leaseOwner);

    // The old holder finishes first, while the new one is still running: its completion must not land.
    first.release({ by: 'old holder' });
    expect((await env.attemptEnded(runId, { fencingToken: first.fencingToken })).outcome).toBe('lease_lost');
    expect(await stepOf(env, runId)).toMatchObject({ state: 'running', output: null, leaseGeneration: second.fencingToken });

    second.release({ by: 'new holder' });
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ by: 'new holder' });
    expect(await stepOf(env, runId)).toMatchObject({
      state: 'completed',
      output: { by: 'new holder' },
      attempt: 1,
      reclaims: 1,
      leaseGeneration: second.fencingToken,
    });
  });
});

describe('expireLease', () => {
  it('reclaims every time although the owner is alive; the old handler aborts with lease_lost at its next heartbeat and its late return is dropped', async () => {
    // Heartbeats every ~200 ms; workers enough for the old holders that are still running.
    const env = await createEnv({ leaseTtl: 600, workers: 4 });
    const runId = await env.client.enqueue('held', {});
    await probe.call(runId, 0);

    for (let round = 1; round <= 3; round += 1) {
      const previous = probe.of(runId)[round - 1];
      expect(previous.abortedAt).toBeUndefined();
      const expiredAt = Date.now();
      await env.expireLease(runId, 'held');

      // Reclaimed at once: not an attempt, no error.
      const reclaimed = await stepOf(env, runId);
      expect(reclaimed).toMatchObject({ reclaims: round, attempt: 1, error: null, errorKind: null });

      const next = await probe.call(runId, round);
      expect(next).toMatchObject({ attempt: 1, reclaims: round, fencingToken: previous.fencingToken + 1 });

      // The old holder learns at its next renewal, well within a few heartbeat intervals.
      const reason = await within(previous.aborted, 5_000, 'no abort');
      expectAborted(reason, 'lease_lost', runId);
      expect(previous.abortedAt! - expiredAt).toBeLessThan(3_000);

      // Its late return is dropped: the step stays with the new holder.
      previous.release({ from: round - 1 });
      expect((await env.attemptEnded(runId, { fencingToken: previous.fencingToken })).outcome).toBe('lease_lost');
      expect(await stepOf(env, runId)).toMatchObject({ state: 'running', output: null, leaseGeneration: next.fencingToken });
    }

    probe.of(runId)[3].release({ from: 3 });
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ from: 3 });
    expect(await stepOf(env, runId)).toMatchObject({ state: 'completed', attempt: 1, reclaims: 3, error: null, output: { from: 3 } });
    expect(probe.of(runId).map((c) => c.fencingToken)).toEqual([1, 2, 3, 4]);
  });

  it('a cooperative handler that throws once its lease is lost consumes no attempt and stores no error', async () => {
    const env = await createEnv({ leaseTtl: 600, workers: 2 });
    const runId = await env.client.enqueue('cooperative', {}, { maxAttempts: 1 });
    const first = await probe.call(runId, 0);

    await env.expireLease(runId, 'cooperative');
    const second = await probe.call(runId, 1);
    expectAborted(await first.aborted, 'lease_lost', runId);
    // The first call threw its StepAbortedError; with maxAttempts 1 a counted failure would discard the step.
    expect((await env.attemptEnded(runId, { fencingToken: first.fencingToken })).outcome).toBe('lease_lost');
    expect(await stepOf(env, runId)).toMatchObject({ state: 'running', attempt: 1, reclaims: 1, error: null, errorKind: null });

    second.release('second');
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toBe('second');
    expect(second).toMatchObject({ attempt: 1, reclaims: 1 });
  });

  it('an enqueue-only replica\'s expireLease reaches a handler running in another client', async () => {
    const env = await createEnv({ leaseTtl: 600, workers: 1 });
    const other = await createEnv({ databaseUrl: env.databaseUrl, isolate: false, runWorkers: false });
    const runId = await env.client.enqueue('held', {});
    const first = await probe.call(runId, 0);

    await other.expireLease(runId, 'held');
    expectAborted(await within(first.aborted, 5_000, 'no abort'), 'lease_lost', runId);
    // Its only worker slot is taken until the old holder returns; then the step runs again.
    first.release('stale');
    const second = await probe.call(runId, 1);
    expect(second).toMatchObject({ attempt: 1, reclaims: 1, fencingToken: 2 });
    second.release('fresh');
    await expect(other.client.result(runId, { timeout: 10_000 })).resolves.toBe('fresh');
  });
});

describe('the seed\'s table: timeout, cancellation, discard and crash reclaim', () => {
  it('timeout: attempt consumed; available after backoff, then discarded when exhausted; error stored (timeout)', async () => {
    const env = await createEnv({ workers: 1 });
    const runId = await env.client.enqueue('timing_out', {});
    const first = await probe.call(runId, 0);
    expectAborted(await within(first.aborted, 5_000, 'no abort'), 'timeout');

    const waiting = await stepWhen(env, runId, (s) => s.attempt === 2 && s.state === 'available', 'the attempt to be consumed');
    expect(waiting).toMatchObject({ errorKind: 'timeout', reclaims: 0, maxAttempts: 2, output: null });
    expect(waiting.error).toMatch(/timed out/);
    // The backoff applies: the next attempt is due about a second after the failure, not at once.
    expect(waiting.scheduledAt.getTime() - first.abortedAt!).toBeGreaterThan(BACKOFF_MS * 0.6);

    const second = await probe.call(runId, 1);
    expect(second.attempt).toBe(2);
    expect(second.startedAt - first.abortedAt!).toBeGreaterThan(BACKOFF_MS * 0.6);
    expectAborted(await within(second.aborted, 5_000, 'no abort'), 'timeout');

    const err = await failureOf(env, runId);
    expect(err.failedSteps).toEqual([{ nodeId: 'timing_out', error: expect.stringMatching(/timed out/), errorKind: 'timeout' }]);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'discarded', attempt: 2, errorKind: 'timeout', output: null });
    expect(probe.of(runId)).toHaveLength(2);
  });

  it('retryable error: attempt consumed; available after backoff, then discarded when exhausted; error stored (error)', async () => {
    const env = await createEnv({ workers: 1 });
    const runId = await env.client.enqueue('flaky', {});
    const first = await probe.call(runId, 0);
    first.release(new Error('flaky #1'));

    const waiting = await stepWhen(env, runId, (s) => s.attempt === 2 && s.state === 'available', 'the attempt to be consumed');
    expect(waiting).toMatchObject({ error: 'flaky #1', errorKind: 'error', reclaims: 0, maxAttempts: 2 });
    expect(waiting.scheduledAt.getTime() - first.returnedAt!).toBeGreaterThan(BACKOFF_MS * 0.6);

    const second = await probe.call(runId, 1);
    expect(second.attempt).toBe(2);
    expect(second.startedAt - first.returnedAt!).toBeGreaterThan(BACKOFF_MS * 0.6);
    second.release(new Error('flaky #2'));

    const err = await failureOf(env, runId);
    expect(err.failedSteps).toEqual([{ nodeId: 'flaky', error: 'flaky #2', errorKind: 'error' }]);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'discarded', attempt: 2, error: 'flaky #2', errorKind: 'error' });
  });

  it('PermanentError: the attempt is the last one; discarded at once with attempts left; error stored (permanent)', async () => {
    const env = await createEnv({ workers: 1 });
    const runId = await env.client.enqueue('flaky', {}, { maxAttempts: 5 });
    (await probe.call(runId, 0)).release(new PermanentError('bad address'));

    const err = await failureOf(env, runId);
    expect(err.failedSteps).toEqual([{ nodeId: 'flaky', error: 'bad address', errorKind: 'permanent' }]);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'discarded', attempt: 1, maxAttempts: 5, errorKind: 'permanent' });
    await env.waitForPasses('cyclone:claim', 2);
    expect(probe.of(runId)).toHaveLength(1);
  });

  it('client.cancel: no attempt consumed; step cancelled; no error stored, even when the handler throws afterwards', async () => {
    const env = await createEnv({ workers: 1, leaseTtl: 300 });
    const runId = await env.client.enqueue('cooperative', {}, { maxAttempts: 1 });
    const call = await probe.call(runId, 0);

    expect(await env.client.cancel(runId)).toBe(true);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'cancelled', attempt: 1, error: null, errorKind: null });
    expect((await env.client.getRun(runId)).state).toBe('cancelled');

    // The handler learns at its next heartbeat and throws its StepAbortedError: nothing is recorded.
    expectAborted(await within(call.aborted, 5_000, 'no abort'), 'cancelled');
    expect((await env.attemptEnded(runId, { fencingToken: call.fencingToken })).outcome).toBe('cancelled');
    expect(await stepOf(env, runId)).toMatchObject({ state: 'cancelled', attempt: 1, error: null, errorKind: null, output: null });
    await expectCycloneError(env.client.result(runId, { timeout: 1_000 }), RunCancelledError, 'run_cancelled');
  });

  it('crash reclaim (expireLease): no attempt consumed; available and claimable at once, scheduled_at untouched; no error', async () => {
    const env = await createEnv({ workers: 2 });
    const runId = await env.client.enqueue('held', {}, { maxAttempts: 1 });
    const first = await probe.call(runId, 0);
    const before = await stepOf(env, runId);

    await env.expireLease(runId, 'held');
    const reclaimed = await stepOf(env, runId);
    expect(reclaimed).toMatchObject({ attempt: 1, reclaims: 1, error: null, errorKind: null });
    expect(reclaimed.scheduledAt).toEqual(before.scheduledAt);
    expect(['available', 'running']).toContain(reclaimed.state);

    const second = await probe.call(runId, 1);
    expect(second).toMatchObject({ attempt: 1, reclaims: 1 });
    first.release('from the lost lease');
    second.release('from the reclaim');
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toBe('from the reclaim');
    expect(await stepOf(env, runId)).toMatchObject({ state: 'completed', attempt: 1, reclaims: 1, error: null });
  });

  it('crash reclaim (a worker that claimed and died): the lease lapses, a live client reclaims it and runs the same attempt', async () => {
    // An enqueue-only client: nothing here runs the step until the second client starts.
    const base = await createEnv({ runWorkers: false });
    const runId = await base.client.enqueue('held', {}, { maxAttempts: 1 });
    const [claimed] = await claimAsDeadWorker(base, ['held'], { leaseTtlMs: 500 });
    expect(claimed.run_id).toBe(runId);
    const dead = await stepOf(base, runId);
    expect(dead).toMatchObject({ state: 'running', leaseOwner: 'dead-worker', leaseGeneration: 1 });

    const live = await replicaOf(base, { leaseTtl: 300 });
    const call = await probe.call(runId, 0);
    // Not before the dead owner's lease ran out (both clocks are this machine's).
    expect(call.startedAt).toBeGreaterThanOrEqual(dead.leaseExpiry!.getTime() - 50);
    expect(call).toMatchObject({ attempt: 1, reclaims: 1, fencingToken: 2 });
    call.release('done by the live worker');
    await expect(live.client.result(runId, { timeout: 10_000 })).resolves.toBe('done by the live worker');
    expect(await stepOf(base, runId)).toMatchObject({ state: 'completed', attempt: 1, reclaims: 1, error: null, errorKind: null });
  });

  it('crash past maxReclaims (expireLease): no attempt consumed; discarded with reclaim_limit; error stored; the run fails', async () => {
    const env = await createEnv({ workers: 2, leaseTtl: 600 });
    const runId = await env.client.enqueue('held', {}, { maxReclaims: 1 });
    await probe.call(runId, 0);
    await env.expireLease(runId, 'held');
    const second = await probe.call(runId, 1);
    expect(second.reclaims).toBe(1);

    await env.expireLease(runId, 'held');
    const step = await stepOf(env, runId);
    expect(step).toMatchObject({ state: 'discarded', attempt: 1, reclaims: 1, maxReclaims: 1, errorKind: 'reclaim_limit' });
    expect(step.error).toMatch(/maxReclaims is 1/);
    const err = await failureOf(env, runId);
    expect(err.failedSteps).toEqual([{ nodeId: 'held', error: step.error, errorKind: 'reclaim_limit' }]);

    // The holder still running learns it lost the step; what it returns is dropped.
    expectAborted(await within(second.aborted, 5_000, 'no abort'), 'lease_lost');
    second.release('too late');
    expect((await env.attemptEnded(runId, { fencingToken: second.fencingToken })).outcome).toBe('lease_lost');
    expect(await stepOf(env, runId)).toMatchObject({ state: 'discarded', output: null, errorKind: 'reclaim_limit' });
  });

  it('crash past maxReclaims (workers that keep dying): the module\'s maxReclaims bounds the crash loop', async () => {
    const env = await createEnv({ runWorkers: false, maxReclaims: 1 });
    const runId = await env.client.enqueue('stranded', {});
    await claimAsDeadWorker(env, ['stranded'], { owner: 'dead-worker-1' });
    // This client's own sweep (every 50-200 ms) reclaims it...
    const reclaimed = await stepWhen(env, runId, (s) => s.state === 'available', 'the first reclaim');
    expect(reclaimed).toMatchObject({ attempt: 1, reclaims: 1, error: null });

    // ...the next worker dies too, and the sweep gives up on it.
    await claimAsDeadWorker(env, ['stranded'], { owner: 'dead-worker-2' });
    const err = await failureOf(env, runId);
    expect(err.failedSteps).toEqual([{ nodeId: 'stranded', error: expect.stringMatching(/maxReclaims is 1/), errorKind: 'reclaim_limit' }]);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'discarded', attempt: 1, reclaims: 1, maxReclaims: 1 });
  });

  it('client.retry on a step discarded by its errors: not an attempt; max_attempts raised by one; available; error cleared', async () => {
    const env = await createEnv({ workers: 1 });
    const runId = await env.client.enqueue('flaky', {}, { maxAttempts: 1 });
    (await probe.call(runId, 0)).release(new Error('first failure'));
    await failureOf(env, runId);

    await env.client.retry(runId, 'flaky');
    const reopened = await stepOf(env, runId);
    expect(reopened).toMatchObject({ attempt: 2, maxAttempts: 2, error: null, errorKind: null, finishedAt: null });
    expect(['available', 'running']).toContain(reopened.state);
    expect((await env.client.getRun(runId)).state).toBe('running');

    // Exactly one more attempt: failing it discards the step again at once.
    const second = await probe.call(runId, 1);
    expect(second.attempt).toBe(2);
    second.release(new Error('second failure'));
    await failureOf(env, runId);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'discarded', attempt: 2, maxAttempts: 2, error: 'second failure' });

    await env.client.retry(runId, 'flaky');
    const third = await probe.call(runId, 2);
    expect(third.attempt).toBe(3);
    third.release('finally');
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toBe('finally');
    expect(probe.of(runId)).toHaveLength(3);
  });

  it('client.retry on a step discarded by reclaim_limit: the unconsumed attempt is kept and the reclaim count starts again', async () => {
    const env = await createEnv({ workers: 2 });
    const runId = await env.client.enqueue('held', {}, { maxReclaims: 0, maxAttempts: 1 });
    const first = await probe.call(runId, 0);
    await env.expireLease(runId, 'held');
    expect(await stepOf(env, runId)).toMatchObject({ state: 'discarded', errorKind: 'reclaim_limit', reclaims: 0 });
    first.release('dropped');

    await env.client.retry(runId, 'held');
    const reopened = await stepOf(env, runId);
    expect(reopened).toMatchObject({ attempt: 1, maxAttempts: 1, reclaims: 0, error: null, errorKind: null });
    const second = await probe.call(runId, 1);
    expect(second).toMatchObject({ attempt: 1, reclaims: 0 });
    second.release('after retry');
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toBe('after retry');
  });
});
