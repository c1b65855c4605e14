import { describe, it, expect } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { InvalidStateError, RunCancelledError, RunNotFoundError, Step, StepAbortedError, type StepContext } from 'cyclone-nestjs';
import type { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { expectCycloneError, untilDatabaseTime } from './support/e2e-helpers.js';
import { HandlerProbe, POLLING_OFF, firstPollTick, stepOf, stepWhen, within, testEnvs } from './support/handler-probe.js';
import { sql } from './support/sql.js';

const probe = new HandlerProbe();

@Injectable()
class CancelSteps {
  /** Ignores its signal: returns (or throws) whatever the test releases it with. */
  @Step('held')
  async held(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }

  @Step('cooperative')
  async cooperative(_input: unknown, ctx: StepContext) {
    return probe.cooperate(ctx);
  }

  @Step('quick')
  async quick() {
    return 'done';
  }
}

const { createEnv } = testEnvs([CancelSteps], probe);

const cancelledResult = (env: CycloneTestEnv, runId: string) =>
  expectCycloneError(env.client.result(runId, { timeout: 2_000 }), RunCancelledError, 'run_cancelled');

function expectCancelledReason(reason: unknown, runId: string): void {
  expect(reason).toBeInstanceOf(StepAbortedError);
  expect(reason).toMatchObject({ reason: 'cancelled', code: 'step_cancelled', runId });
}

describe('cancel', () => {
  it('cancels a running, an available and a delayed job at once: run and step cancelled, nothing of theirs runs afterwards', async () => {
    // One worker: the first job keeps it busy, so the second waits available.
    const env = await createEnv({ workers: 1, leaseTtl: 300 });
    const running = await env.client.enqueue('held', {});
    const runningCall = await probe.call(running);
    const available = await env.client.enqueue('held', {});
    const delayed = await env.client.enqueue('held', {}, { processIn: 300 });
    // A claim that was out when the first job's enqueue took the slot may have
    // taken the second too: it hands it back at once, available.
    await stepWhen(env, available, (s) => s.state === 'available', 'the second job to wait, available');
    const { state, scheduledAt } = await stepOf(env, delayed);
    expect(state).toBe('available');

    for (const runId of [running, available, delayed]) {
      expect(await env.client.cancel(runId)).toBe(true);
      // Immediate: by the time cancel returns, the run and its step are cancelled.
      expect((await env.client.getRun(runId)).state).toBe('cancelled');
      expect(await stepOf(env, runId)).toMatchObject({ state: 'cancelled', attempt: 1, error: null, errorKind: null });
      await cancelledResult(env, runId);
    }

    // The worker is freed once the running handler returns; neither other job runs, the delayed one past its time too.
    expectCancelledReason(await within(runningCall.aborted, 5_000, 'no abort'), running);
    runningCall.release('ignored');
    expect((await env.attemptEnded(running)).outcome).toBe('cancelled');
    await untilDatabaseTime(env, scheduledAt);
    await env.waitForPasses('cyclone:claim', 2);
    expect(probe.of(available)).toHaveLength(0);
    expect(probe.of(delayed)).toHaveLength(0);
    const next = await env.client.enqueue('quick', {});
    await expect(env.client.result(next, { timeout: 10_000 })).resolves.toBe('done');
  });

  it('cancels every non-terminal step of a run in one transaction and leaves finished steps alone', async () => {
    const env = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF });
    const runId = await env.client.enqueue('held', {}, { processIn: '1h' });
    // Steps in every state a run's node can be in, beside the job's own (delayed) step.
    const states = ['pending', 'available', 'running', 'waiting_signal', 'waiting_timer', 'paused', 'completed', 'discarded'];
    for (const state of states) {
      await sql(
        env,
        `INSERT INTO cyclone_steps (run_id, node_id, kind, queue, state, max_attempts, paused_state, lease_owner, lease_expiry,
                                    started_at, lease_generation, wake_at, finished_at)
         VALUES ($1, $2, 'held', 'nowhere', $2, 3,
                 CASE WHEN $2 = 'paused' THEN 'available' END,
                 CASE WHEN $2 = 'running' THEN 'somebody' END,
                 CASE WHEN $2 = 'running' THEN now() + interval '1 minute' END,
                 CASE WHEN $2 = 'running' THEN now() END,
                 CASE WHEN $2 = 'running' THEN 1 ELSE 0 END,
                 CASE WHEN $2 IN ('waiting_signal', 'waiting_timer') THEN now() + interval '1 hour' END,
                 CASE WHEN $2 IN ('completed', 'discarded') THEN now() - interval '1 minute' END)`,
        [runId, state],
      );
    }

    expect(await env.client.cancel(runId)).toBe(true);
    const steps = await env.client.listSteps(runId);
    const stateOf = Object.fromEntries(steps.map((s) => [s.nodeId, s.state]));
    expect(stateOf).toEqual({
      held: 'cancelled',
      pending: 'cancelled',
      available: 'cancelled',
      running: 'cancelled',
      waiting_signal: 'cancelled',
      waiting_timer: 'cancelled',
      paused: 'cancelled',
      completed: 'completed',
      discarded: 'discarded',
    });
    const run = await env.client.getRun(runId);
    expect(run.state).toBe('cancelled');
    // One transaction: every change carries the same transaction timestamp as the run's.
    const cancelled = steps.filter((s) => s.state === 'cancelled');
    for (const step of cancelled) expect(step.finishedAt).toEqual(run.finishedAt);
    expect(steps.find((s) => s.nodeId === 'completed')!.finishedAt!.getTime()).toBeLessThan(run.finishedAt!.getTime());
    const [{ paused_state }] = await sql(env, "SELECT paused_state FROM cyclone_steps WHERE run_id = $1 AND node_id = 'paused'", [runId]);
    expect(paused_state).toBeNull();
    expect(steps.find((s) => s.nodeId === 'running')).toMatchObject({ leaseExpiry: null });
  });

  it('a running handler\'s signal aborts with reason cancelled at its next heartbeat; what it throws then is not stored', async () => {
    // Polling off: only the heartbeat (every ~100 ms) can tell the worker.
    const env = await createEnv({ leaseTtl: 300, pollInterval: POLLING_OFF });
    await firstPollTick(env);
    const runId = await env.client.enqueue('cooperative', {}, { maxAttempts: 1 });
    const call = await probe.call(runId);

    const cancelledAt = Date.now();
    expect(await env.client.cancel(runId)).toBe(true);
    expectCancelledReason(await within(call.aborted, 5_000, 'no abort'), runId);
    // Within a few heartbeat intervals (~100 ms each), not a sweep or lease TTL later.
    expect(call.abortedAt! - cancelledAt).toBeLessThan(1_500);

    expect((await env.attemptEnded(runId)).outcome).toBe('cancelled');
    expect(await stepOf(env, runId)).toMatchObject({ state: 'cancelled', attempt: 1, error: null, errorKind: null, output: null });
    expect((await env.client.getRun(runId)).state).toBe('cancelled');
  });

  it('a handler that ignores the cancel and returns later has its result dropped', async () => {
    const env = await createEnv({ leaseTtl: 300 });
    const runId = await env.client.enqueue('held', {});
    const call = await probe.call(runId);

    expect(await env.client.cancel(runId)).toBe(true);
    expectCancelledReason(await within(call.aborted, 5_000, 'no abort'), runId);
    call.release({ finished: 'anyway' });
    expect((await env.attemptEnded(runId)).outcome).toBe('cancelled');
    expect(await stepOf(env, runId)).toMatchObject({ state: 'cancelled', output: null, error: null, attempt: 1 });
    await cancelledResult(env, runId);
    await expectCycloneError(env.client.output(runId, 'held'), InvalidStateError, 'invalid_state');
  });

  it('cancel returns false for a run that already completed or was cancelled, and changes nothing', async () => {
    const env = await createEnv();
    const completed = await env.client.enqueue('quick', {});
    await expect(env.client.result(completed, { timeout: 10_000 })).resolves.toBe('done');
    expect(await env.client.cancel(completed)).toBe(false);
    expect((await env.client.getRun(completed)).state).toBe('completed');
    expect(await stepOf(env, completed)).toMatchObject({ state: 'completed', output: 'done' });
    await expect(env.client.result(completed, { timeout: 1_000 })).resolves.toBe('done');

    const cancelled = await env.client.enqueue('held', {}, { processIn: '1h' });
    expect(await env.client.cancel(cancelled)).toBe(true);
    const finishedAt = (await env.client.getRun(cancelled)).finishedAt;
    expect(await env.client.cancel(cancelled)).toBe(false);
    expect((await env.client.getRun(cancelled)).finishedAt).toEqual(finishedAt);

    await expectCycloneError(env.client.cancel('00000000-0000-4000-8000-000000000000'), RunNotFoundError, 'run_not_found');
  });

  it('a step cancelled while its retry waits out the backoff never runs again', async () => {
    const env = await createEnv({ workers: 1 });
    const runId = await env.client.enqueue('held', {}, { maxAttempts: 3 });
    (await probe.call(runId)).release(new Error('transient'));
    const retry = await stepWhen(env, runId, (s) => s.state === 'available' && s.attempt === 2, 'the retry to be scheduled');

    expect(await env.client.cancel(runId)).toBe(true);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'cancelled', attempt: 2 });
    // The default backoff after a first failure is about a second: past it, the workers look again.
    await untilDatabaseTime(env, retry.scheduledAt);
    await env.waitForPasses('cyclone:claim', 2);
    expect(probe.of(runId)).toHaveLength(1);
    expect((await stepOf(env, runId)).state).toBe('cancelled');
  });
});
