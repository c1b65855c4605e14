import { describe, it, expect } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { RunFailedError, Step, StepAbortedError, type StepContext } from 'cyclone-nestjs';
import { RecoverySweeper } from '../libs/cyclone/src/maintenance/recovery.sweeper.js';
import type { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { expectCycloneError, untilDatabaseTime } from './support/e2e-helpers.js';
import { HandlerProbe, POLLING_OFF, firstPollTick, stepOf, stepWhen, within, testEnvs } from './support/handler-probe.js';
import { sql } from './support/sql.js';

const probe = new HandlerProbe();

@Injectable()
class TimeoutSteps {
  @Step('cooperative', { timeout: 300, maxAttempts: 1 })
  async cooperative(_input: unknown, ctx: StepContext) {
    return probe.cooperate(ctx);
  }

  /** Ignores its signal: returns (or throws) whatever the test releases it with, whenever that is. */
  @Step('stubborn', { timeout: 200, maxAttempts: 2, backoff: () => 100 })
  async stubborn(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }

  /** Keeps the event loop to itself past its deadline, then returns success. */
  @Step('busy', { timeout: 150, maxAttempts: 1 })
  async busy(input: { ms: number }, ctx: StepContext) {
    const call = probe.enter(ctx);
    const until = Date.now() + input.ms;
    while (Date.now() < until) {
      // Busy: no timer can fire, the worker's own deadline included.
    }
    call.returnedAt = Date.now();
    return { finished: true };
  }

  @Step('ten_seconds', { timeout: '10s' })
  async tenSeconds(_input: unknown, ctx: StepContext) {
    return probe.cooperate(ctx);
  }

  @Step('quarter_second', { timeout: 250 })
  async quarterSecond(_input: unknown, ctx: StepContext) {
    return probe.cooperate(ctx);
  }

  @Step('twenty_seconds', { timeout: '20s', maxAttempts: 2, backoff: () => 100 })
  async twentySeconds(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }

  @Step('quick')
  async quick() {
    return 'quick';
  }
}

const { createEnv } = testEnvs([TimeoutSteps], probe);

function expectAborted(reason: unknown, why: StepAbortedError['reason']): void {
  expect(reason).toBeInstanceOf(StepAbortedError);
  expect((reason as StepAbortedError).reason).toBe(why);
}

const failureOf = (env: CycloneTestEnv, runId: string) =>
  expectCycloneError(env.client.result(runId, { timeout: 10_000 }), RunFailedError, 'run_failed');

describe('the worker\'s deadline', () => {
  it('a cooperative handler sees ctx.signal abort with reason timeout at its deadline; the attempt is consumed as a timeout', async () => {
    const env = await createEnv();
    const runId = await env.client.enqueue('cooperative', {});
    const call = await probe.call(runId);
    // ctx.deadline is the attempt's start (just before the handler was entered) plus the timeout.
    const deadline = call.deadline!.getTime();
    expect(deadline - call.startedAt).toBeGreaterThan(0);
    expect(deadline - call.startedAt).toBeLessThanOrEqual(300);

    expectAborted(await within(call.aborted, 5_000, 'no abort'), 'timeout');
    // Not before the deadline; after it by no more than a busy machine's timer delay.
    expect(call.abortedAt!).toBeGreaterThanOrEqual(deadline - 5);
    expect(call.abortedAt! - deadline).toBeLessThan(3_000);

    const err = await failureOf(env, runId);
    expect(err.failedSteps).toEqual([{ nodeId: 'cooperative', error: expect.stringMatching(/timed out/), errorKind: 'timeout' }]);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'discarded', attempt: 1, reclaims: 0, timeoutMs: 300, output: null });
  });

  it('a handler that returns success after its deadline has still timed out', async () => {
    // No sweep after startup: the worker alone records this attempt.
    const env = await createEnv({ pollInterval: POLLING_OFF });
    const runId = await env.client.enqueue('stubborn', {}, { maxAttempts: 1 });
    const call = await probe.call(runId);
    expectAborted(await within(call.aborted, 5_000, 'no abort'), 'timeout');
    call.release({ looks: 'fine' });

    const err = await failureOf(env, runId);
    expect(err.failedSteps).toEqual([{ nodeId: 'stubborn', error: expect.stringMatching(/timed out/), errorKind: 'timeout' }]);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'discarded', attempt: 1, output: null, errorKind: 'timeout' });
  });

  it('a success that arrives before the worker\'s timer fires but after the database deadline is refused, and the sweep times the attempt out', async () => {
    const env = await createEnv({ leaseTtl: 600 });
    const runId = await env.client.enqueue('busy', { ms: 450 });
    const err = await failureOf(env, runId);
    const [call] = probe.of(runId);
    expect(call.returnedAt! - call.startedAt).toBeGreaterThanOrEqual(450);
    expect(err.failedSteps).toEqual([{ nodeId: 'busy', error: expect.stringMatching(/timed out/), errorKind: 'timeout' }]);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'discarded', attempt: 1, output: null, errorKind: 'timeout' });
  });
});

describe('handlers that ignore their signal', () => {
  it('the step moves on to its next attempt while the handler still runs, and the handler\'s late result is dropped', async () => {
    const env = await createEnv({ workers: 2 });
    const runId = await env.client.enqueue('stubborn', {});
    const first = await probe.call(runId, 0);

    const second = await probe.call(runId, 1, 5_000);
    expect(first.returnedAt).toBeUndefined();
    expectAborted(first.abortReason, 'timeout');
    expect(second.attempt).toBe(2);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'running', attempt: 2, errorKind: 'timeout' });

    second.release('second attempt');
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toBe('second attempt');
    // The worker stopped waiting for the first call when it timed out (its own timer or the sweep came first):
    // its attempt is over, so what it returns now goes nowhere.
    expect(['retried', 'lease_lost']).toContain((await env.attemptEnded(runId, { fencingToken: first.fencingToken })).outcome);
    first.release('first attempt, far too late');
    await probe.returned(first);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'completed', attempt: 2, output: 'second attempt' });
  });

  it('with no attempts left the step is discarded while the handler still runs, and its late result is dropped', async () => {
    const env = await createEnv({ workers: 1 });
    const runId = await env.client.enqueue('stubborn', {}, { maxAttempts: 1 });
    const call = await probe.call(runId, 0);

    const err = await failureOf(env, runId);
    expect(call.returnedAt).toBeUndefined();
    expect(err.failedSteps).toEqual([{ nodeId: 'stubborn', error: expect.stringMatching(/timed out/), errorKind: 'timeout' }]);

    expect(['discarded', 'lease_lost']).toContain((await env.attemptEnded(runId, { fencingToken: call.fencingToken })).outcome);
    call.release({ late: true });
    await probe.returned(call);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'discarded', attempt: 1, output: null, errorKind: 'timeout' });
    expect((await env.client.getRun(runId)).state).toBe('failed');
  });

  it('a hung handler does not keep its worker slot: other jobs still run', async () => {
    const env = await createEnv({ workers: 1 });
    const hung = await env.client.enqueue('stubborn', {}, { maxAttempts: 1 });
    await probe.call(hung, 0);
    const next = await env.client.enqueue('quick', {});
    await expect(env.client.result(next, { timeout: 10_000 })).resolves.toBe('quick');
    expect(probe.of(hung)[0].returnedAt).toBeUndefined();
  });
});

describe('per-enqueue timeout', () => {
  it('a shorter per-enqueue timeout wins over the step\'s', async () => {
    const env = await createEnv();
    const runId = await env.client.enqueue('ten_seconds', {}, { timeout: 250, maxAttempts: 1 });
    const call = await probe.call(runId);
    expectAborted(await within(call.aborted, 5_000, 'no abort'), 'timeout');
    expect(call.abortedAt! - call.startedAt).toBeLessThan(5_000);
    expect(call.deadline!.getTime() - call.startedAt).toBeLessThanOrEqual(250);
    await failureOf(env, runId);
    expect(await stepOf(env, runId)).toMatchObject({ timeoutMs: 250, errorKind: 'timeout' });
  });

  it('a longer per-enqueue timeout wins over the step\'s', async () => {
    const env = await createEnv();
    const runId = await env.client.enqueue('quarter_second', {}, { timeout: '10s', maxAttempts: 1 });
    const call = await probe.call(runId);
    // Several times the step's own 250 ms on the database clock, and the sweep has looked since.
    await untilDatabaseTime(env, new Date((await stepOf(env, runId)).startedAt!.getTime() + 1_000));
    await env.waitForPasses('cyclone:recovery', 2);
    expect(call.abortedAt).toBeUndefined();
    expect(call.deadline!.getTime() - call.startedAt).toBeGreaterThan(9_000);
    call.release('in time');
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toBe('in time');
    expect(await stepOf(env, runId)).toMatchObject({ timeoutMs: 10_000, state: 'completed', attempt: 1 });
  });
});

describe('the database clock', () => {
  it('once started_at + timeout has passed on the database clock, renewals stop and the sweep consumes the attempt', async () => {
    // Heartbeats every ~100 ms; no sweep but the ones this test calls.
    const env = await createEnv({ leaseTtl: 300, pollInterval: POLLING_OFF });
    await firstPollTick(env);
    const runId = await env.client.enqueue('twenty_seconds', {});
    const call = await probe.call(runId);
    await stepWhen(env, runId, (s) => s.heartbeatAt!.getTime() > s.startedAt!.getTime(), 'a first renewal');

    // The attempt started 25 s ago as far as the database knows; the worker's own 20 s timer is far off.
    await sql(env, "UPDATE cyclone_steps SET started_at = started_at - interval '25 seconds' WHERE run_id = $1", [runId]);
    expect(call.deadline!.getTime() - Date.now()).toBeGreaterThan(15_000);

    // The next renewal matches nothing, and the handler's signal says why.
    expectAborted(await within(call.aborted, 5_000, 'no abort'), 'timeout');
    const stopped = await stepOf(env, runId);
    // Renewals come every TTL/3 (100 ms): past two TTLs, several would have.
    await untilDatabaseTime(env, new Date(stopped.heartbeatAt!.getTime() + 600));
    const later = await stepOf(env, runId);
    expect(later.heartbeatAt).toEqual(stopped.heartbeatAt);
    expect(later).toMatchObject({ state: 'running', attempt: 1 });
    const [{ lapsed }] = await sql(env, 'SELECT lease_expiry < now() AS lapsed FROM cyclone_steps WHERE run_id = $1', [runId]);
    expect(lapsed).toBe(true);

    // The sweep takes the step from the wedged handler and consumes the attempt.
    expect(await env.app.get(RecoverySweeper).sweep()).toEqual(['timeout']);
    const swept = await stepOf(env, runId);
    expect(swept).toMatchObject({ state: 'available', attempt: 2, errorKind: 'timeout', leaseOwner: null, reclaims: 0 });
    expect(swept.error).toMatch(/timed out/);

    // The handler returns success at last: dropped, the attempt stays consumed once.
    call.release({ ok: true });
    expect((await env.attemptEnded(runId, { fencingToken: call.fencingToken })).outcome).toBe('lease_lost');
    expect(await stepOf(env, runId)).toMatchObject({ state: 'available', attempt: 2, output: null, errorKind: 'timeout' });
  });

  it.each([
    { maxAttempts: 1, outcome: 'timeout_discarded', state: 'discarded', attempt: 1 },
    { maxAttempts: 2, outcome: 'timeout', state: 'available', attempt: 2 },
  ])(
    'when the sweep times the attempt out before the next renewal, the handler still hears reason timeout (maxAttempts $maxAttempts)',
    async ({ maxAttempts, outcome, state, attempt }) => {
      // Renewals every ~1 s: the sweep below comes first.
      const env = await createEnv({ leaseTtl: 3_000, pollInterval: POLLING_OFF });
      await firstPollTick(env);
      const runId = await env.client.enqueue('twenty_seconds', {}, { maxAttempts });
      const call = await probe.call(runId);
      // Right after a renewal, the next one is about a second away.
      await stepWhen(env, runId, (s) => s.heartbeatAt!.getTime() > s.startedAt!.getTime(), 'a first renewal', 5_000);

      await sql(env, "UPDATE cyclone_steps SET started_at = started_at - interval '25 seconds' WHERE run_id = $1", [runId]);
      expect(await env.app.get(RecoverySweeper).sweep()).toEqual([outcome]);
      expect(call.abortedAt).toBeUndefined();
      expect(await stepOf(env, runId)).toMatchObject({ state, attempt, errorKind: 'timeout' });

      expectAborted(await within(call.aborted, 5_000, 'no abort'), 'timeout');
      call.release('too late');
      expect((await env.attemptEnded(runId, { fencingToken: call.fencingToken })).outcome).toBe('lease_lost');
      expect(await stepOf(env, runId)).toMatchObject({ state, attempt, output: null, errorKind: 'timeout' });
    },
  );
});
