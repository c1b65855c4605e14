import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { CycloneStats, InvalidOptionError, Step, WaitTimeoutError, type StepContext } from 'cyclone-nestjs';
import { HandlerProbe, stepOf, testEnvs } from './support/handler-probe.js';
import { expectCycloneError } from './support/e2e-helpers.js';

/**
 * The test kit's waits on the engine (docs/testing.md): `waitForPasses`
 * counts only passes that began after the call, and `attemptEnded` tells how
 * an attempt ended, also one that ended before the call.
 */

const probe = new HandlerProbe();

@Injectable()
class KitSteps {
  @Step('kit_held')
  held(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }
}

const { createEnv } = testEnvs([KitSteps], probe);

describe('waitForPasses', () => {
  it('resolves once n passes that began after the call have ended, for the loop and queue asked', async () => {
    const env = await createEnv({ queues: { default: { workers: 1 }, other: { workers: 1 } } });
    const passes: { loop: string; queue?: string; startedAt: number; endedAt: number }[] = [];
    env.app.get(CycloneStats).events.observe({ passEnded: (p) => passes.push({ ...p, endedAt: performance.now() }) });
    for (const [loop, queue] of [['cyclone:claim', 'other'], ['cyclone:recovery', undefined], ['cyclone:timers', undefined]] as const) {
      const since = performance.now();
      await env.waitForPasses(loop, 2, queue === undefined ? {} : { queue });
      const whole = passes.filter((p) => p.loop === loop && p.startedAt >= since && (queue === undefined || p.queue === queue));
      expect([loop, whole.length]).toEqual([loop, 2]);
      expect(whole.every((p) => p.endedAt <= performance.now())).toBe(true);
    }
  });

  it('a step due later is not claimed over claim passes; it is once due', async () => {
    const env = await createEnv({ workers: 1 });
    const runId = await env.client.enqueue('kit_held', {}, { processIn: '2s' });
    await env.waitForPasses('cyclone:claim', 3);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'available' });
    expect(probe.of(runId)).toEqual([]);
    (await probe.call(runId, 0, 15_000)).release('late');
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toBe('late');
  });

  it('refuses a loop that does not run here and gives up with WaitTimeoutError', async () => {
    const env = await createEnv({ workers: 1 });
    const enqueueOnly = await createEnv({ runWorkers: false });
    await expectCycloneError(env.waitForPasses('cyclone:nothing' as never), InvalidOptionError, 'invalid_option');
    await expectCycloneError(env.waitForPasses('cyclone:claim', 1, { queue: 'elsewhere' }), InvalidOptionError, 'invalid_option');
    await expectCycloneError(env.waitForPasses('cyclone:recovery', 1, { queue: 'default' }), InvalidOptionError, 'invalid_option');
    await expectCycloneError(env.waitForPasses('cyclone:metrics'), InvalidOptionError, 'invalid_option');
    await expectCycloneError(env.waitForPasses('cyclone:claim', 0), InvalidOptionError, 'invalid_option');
    await expectCycloneError(enqueueOnly.waitForPasses('cyclone:claim'), InvalidOptionError, 'invalid_option');
    const err = await expectCycloneError(env.waitForPasses('cyclone:recovery', 1_000, { timeout: 50 }), WaitTimeoutError, 'wait_timeout');
    expect(err.message).toMatch(/cyclone:recovery ended \d+ of 1000 passes in 50 ms/);
  });
});

describe('attemptEnded', () => {
  it("tells a completed attempt from a stale holder's dropped one, also after the fact", async () => {
    const env = await createEnv({ workers: 2, leaseTtl: 3_000 });
    const runId = await env.client.enqueue('kit_held', {});
    const first = await probe.call(runId, 0);
    await env.expireLease(runId, 'kit_held');
    const second = await probe.call(runId, 1);

    first.release('stale');
    expect(await env.attemptEnded(runId, { fencingToken: first.fencingToken })).toMatchObject({
      runId,
      nodeId: 'kit_held',
      attempt: 1,
      fencingToken: first.fencingToken,
      outcome: 'lease_lost',
    });
    expect(await stepOf(env, runId)).toMatchObject({ state: 'running', output: null });

    second.release('fresh');
    const end = await env.attemptEnded(runId, { fencingToken: second.fencingToken });
    expect(end.outcome).toBe('completed');
    expect(await stepOf(env, runId)).toMatchObject({ state: 'completed', output: 'fresh' });
    // Asked again, long after: the same ends, from what the environment kept.
    expect((await env.attemptEnded(runId, { fencingToken: first.fencingToken })).outcome).toBe('lease_lost');
    await expectCycloneError(env.attemptEnded(runId, { fencingToken: 99, timeout: 50 }), WaitTimeoutError, 'wait_timeout');
  });
});
