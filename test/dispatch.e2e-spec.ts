import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { createClient } from 'redis';
import { Step, defineWorkflow, type StepContext } from 'cyclone-nestjs';
import type { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { untilRunningStepsLapse } from './support/e2e-helpers.js';
import { HandlerProbe, POLLING_OFF, claimAsDeadWorker, testEnvs } from './support/handler-probe.js';
import { describeWithRedis, freshTestRedisUrl } from './support/redis.js';
import { sql } from './support/sql.js';
import { waitFor } from './support/wait.js';

const probe = new HandlerProbe();
const calls = new Map<string, number>();

@Injectable()
class DispatchSteps {
  @Step('count')
  async count(input: { key: string }) {
    calls.set(input.key, (calls.get(input.key) ?? 0) + 1);
    return input.key;
  }

  @Step('held')
  async held(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }
}

const Chain = defineWorkflow<{ key: string }>('chain')
  .step('a', 'count')
  .step('b', 'count', { after: ['a'] })
  .step('c', 'count', { after: ['b'] });

const Nap = defineWorkflow<{ key: string }>('nap')
  .step('before', 'count')
  .sleep('nap', 300, { after: ['before'] })
  .step('after', 'count', { after: ['nap'] });

const { createEnv, replicaOf } = testEnvs([DispatchSteps], probe);

/** Outbox rows and pending stream messages left behind: none once everything has settled. */
async function leftovers(env: CycloneTestEnv, redisUrl: string): Promise<{ outbox: number; pending: number }> {
  const [{ n }] = await sql<{ n: number }>(env, 'SELECT count(*)::int AS n FROM cyclone_outbox');
  const redis = createClient({ url: redisUrl });
  await redis.connect();
  try {
    let pending = 0;
    for (const key of await redis.keys('cyclone:stream:*')) {
      pending += (await redis.xPending(key, 'cyclone')).pending;
    }
    return { outbox: n, pending };
  } finally {
    redis.destroy();
  }
}

describeWithRedis('broker dispatch', () => {
  it('runs every enqueued job once through the streams, leaving no outbox row and no pending message', async () => {
    const redisUrl = await freshTestRedisUrl();
    const env = await createEnv({ workers: 4, pollInterval: POLLING_OFF, dispatch: { redis: { url: redisUrl } } });
    calls.clear();
    const keys = Array.from({ length: 200 }, (_, n) => `job-${n}`);
    const runIds = await env.client.enqueueMany('count', keys.map((key) => ({ key })));
    await Promise.all(runIds.map((id) => env.client.result(id, { timeout: 20_000 })));
    expect([...calls.values()].every((n) => n === 1)).toBe(true);
    expect(calls.size).toBe(200);
    await waitFor('no outbox row and no pending message', async () => {
      const left = await leftovers(env, redisUrl);
      return left.outbox === 0 && left.pending === 0 ? left : undefined;
    });
  });

  // Seed 004, step 7: TestExpiredLeaseIsRecovered.
  it('an expired lease is recovered and the step runs once', async () => {
    const redisUrl = await freshTestRedisUrl();
    const dispatch = { redis: { url: redisUrl } };
    const producer = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF, leaseTtl: '1s', dispatch });
    calls.clear();
    const runId = await producer.client.enqueue('count', { key: 'orphan' });
    // A worker that leased the step and died.
    expect(await claimAsDeadWorker(producer, ['count'], { leaseTtlMs: 1_000 })).toHaveLength(1);
    await untilRunningStepsLapse(producer);

    const worker = await replicaOf(producer, { workers: 2, pollInterval: POLLING_OFF, leaseTtl: '1s', dispatch });
    await expect(worker.client.result(runId, { timeout: 30_000 })).resolves.toBe('orphan');
    expect(calls.get('orphan')).toBe(1);
    const [step] = await sql<{ reclaims: number; attempt: number }>(producer, 'SELECT reclaims, attempt FROM cyclone_steps');
    // The same attempt, run again: a crash is not a failure.
    expect(step).toEqual({ reclaims: 1, attempt: 1 });
  });

  // Seed 004, step 7: TestOutboxIsWokenByNotify.
  it('the outbox is woken by NOTIFY: a three-node workflow finishes within 5 s with a one-minute poll', async () => {
    const redisUrl = await freshTestRedisUrl();
    const env = await createEnv({
      workers: 2,
      pollInterval: ['1m', '1m'],
      workflows: [Chain],
      dispatch: { redis: { url: redisUrl } },
    });
    calls.clear();
    const started = performance.now();
    const runId = await env.client.start(Chain, { key: 'chain' });
    await env.client.result(runId, { timeout: 20_000 });
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(calls.get('chain')).toBe(3);
  });

  it('fires a timer on time without polling: the sweeper sleeps until it is due, woken when it is set', async () => {
    const redisUrl = await freshTestRedisUrl();
    const env = await createEnv({ workers: 2, pollInterval: ['1m', '1m'], workflows: [Nap], dispatch: { redis: { url: redisUrl } } });
    calls.clear();
    const started = performance.now();
    const runId = await env.client.start(Nap, { key: 'nap' });
    await env.client.result(runId, { timeout: 20_000 });
    // The 300 ms sleep and two steps: no poll tick (the next is a minute away), nor the sweeper's 5 s look.
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(calls.get('nap')).toBe(2);
  });
});
