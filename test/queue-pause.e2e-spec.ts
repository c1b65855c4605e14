import { describe, it, expect } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { InvalidOptionError, QueueNotFoundError, Step, type StepContext } from 'cyclone-nestjs';
import type { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { expectCycloneError } from './support/e2e-helpers.js';
import { HandlerProbe, POLLING_OFF, firstPollTick, ownerOf, stepOf, testEnvs } from './support/handler-probe.js';

const probe = new HandlerProbe();
/** Run ids of every `quick` call. */
const ran: string[] = [];

@Injectable()
class QueueSteps {
  /** Held until the test releases it; returns what it is released with. */
  @Step('held')
  async held(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }

  @Step('quick')
  async quick(_input: unknown, ctx: StepContext) {
    ran.push(ctx.runId);
    return 'done';
  }
}

const { createEnv, replicaOf } = testEnvs([QueueSteps], probe);

const fastPoll: [number, number] = [20, 50];
/** Two slots per client on each queue: four held steps fill both replicas. */
const queues = { default: { workers: 2 }, other: { workers: 2 } };


/** The clients holding the leases of these runs' (running) steps. */
async function leaseOwners(env: CycloneTestEnv, runIds: string[]): Promise<Set<string | null>> {
  return new Set(await Promise.all(runIds.map(async (runId) => (await stepOf(env, runId)).leaseOwner)));
}

describe('pauseQueue / resumeQueue', () => {
  it('pausing stops claiming on every replica while running steps finish and other queues go on; resuming restarts claiming on every replica', async () => {
    const base = await createEnv({ queues, pollInterval: fastPoll });
    const replica = await replicaOf(base, { queues, pollInterval: fastPoll });

    // Every slot of the default queue busy, on both clients.
    const running = await base.client.enqueueMany('held', [1, 2, 3, 4].map((n) => ({ n })));
    const runningCalls = await Promise.all(running.map((runId) => probe.call(runId)));
    expect(await leaseOwners(base, running)).toEqual(new Set([ownerOf(base), ownerOf(replica)]));

    expect(await replica.client.pauseQueue('default')).toBe(true);
    expect(await base.client.pauseQueue('default')).toBe(false);
    expect(await base.client.pausedQueues()).toEqual(['default']);
    expect(await replica.client.pausedQueues()).toEqual(['default']);

    const waiting = await base.client.enqueueMany('held', [5, 6, 7, 8].map((n) => ({ n })));
    // Another queue is not affected.
    const elsewhere = await Promise.all([1, 2, 3].map((n) => replica.client.enqueue('quick', { n }, { queue: 'other' })));
    for (const runId of elsewhere) await expect(base.client.result(runId, { timeout: 10_000 })).resolves.toBe('done');

    // Steps claimed before the pause finish normally, freeing every slot ...
    runningCalls.forEach((call, i) => call.release({ finished: i }));
    for (const [i, runId] of running.entries()) {
      await expect(base.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ finished: i });
    }
    // ... yet neither client claims from the paused queue, however often it polls.
    await Promise.all([base, replica].map((env) => env.waitForPasses('cyclone:claim', 3, { queue: 'default' })));
    expect(probe.calls).toHaveLength(running.length);
    for (const runId of waiting) {
      expect(await stepOf(base, runId)).toMatchObject({ state: 'available', attempt: 1, leaseOwner: null, startedAt: null });
    }

    expect(await base.client.resumeQueue('default')).toBe(true);
    expect(await replica.client.resumeQueue('default')).toBe(false);
    expect(await replica.client.pausedQueues()).toEqual([]);
    // Both clients claim again: four held steps need both clients' two slots.
    const resumedCalls = await Promise.all(waiting.map((runId) => probe.call(runId, 0, 5_000)));
    expect(await leaseOwners(base, waiting)).toEqual(new Set([ownerOf(base), ownerOf(replica)]));
    resumedCalls.forEach((call, i) => call.release({ resumed: i }));
    for (const [i, runId] of waiting.entries()) {
      await expect(base.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ resumed: i });
    }
    expect(probe.calls).toHaveLength(running.length + waiting.length);
  });

  it('with polling off, the wake-up sent by resumeQueue starts the waiting steps on every replica', async () => {
    const base = await createEnv({ queues, pollInterval: POLLING_OFF });
    const replica = await replicaOf(base, { queues, pollInterval: POLLING_OFF });
    await Promise.all([base, replica].map(firstPollTick));

    expect(await base.client.pauseQueue('default')).toBe(true);
    // Their enqueue wake-ups arrive while the queue is paused and claim nothing.
    const looked = Promise.all([base, replica].map((env) => env.waitForPasses('cyclone:claim', 1, { queue: 'default' })));
    const waiting = await base.client.enqueueMany('held', [1, 2, 3, 4].map((n) => ({ n })));
    await looked;
    expect(probe.calls).toHaveLength(0);

    // The next poll is a minute away: only the resume's wake-up can start them.
    const resumedAt = Date.now();
    expect(await replica.client.resumeQueue('default')).toBe(true);
    const calls = await Promise.all(waiting.map((runId) => probe.call(runId, 0, 5_000)));
    expect(Math.max(...calls.map((c) => c.startedAt)) - resumedAt).toBeLessThan(5_000);
    expect(await leaseOwners(base, waiting)).toEqual(new Set([ownerOf(base), ownerOf(replica)]));
    calls.forEach((call, i) => call.release({ resumed: i }));
    for (const [i, runId] of waiting.entries()) {
      await expect(base.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ resumed: i });
    }
  });

  it('a client that starts while the queue is paused does not claim from it until it is resumed', async () => {
    // An enqueue-only client pauses the queue; the pause is kept in the database.
    const admin = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF });
    expect(await admin.client.pauseQueue('default')).toBe(true);
    const runIds = await admin.client.enqueueMany('quick', [{ n: 1 }, { n: 2 }]);

    const worker = await replicaOf(admin, { pollInterval: fastPoll });
    await firstPollTick(worker);
    await worker.waitForPasses('cyclone:claim', 3);
    expect(ran.filter((runId) => runIds.includes(runId))).toEqual([]);
    for (const runId of runIds) expect((await stepOf(admin, runId)).state).toBe('available');

    expect(await admin.client.resumeQueue('default')).toBe(true);
    for (const runId of runIds) await expect(admin.client.result(runId, { timeout: 10_000 })).resolves.toBe('done');
    expect(ran.filter((runId) => runIds.includes(runId)).sort()).toEqual([...runIds].sort());
  });

  it('pausing twice or resuming a queue that is not paused returns false; pausedQueues lists every paused queue; bad names are refused', async () => {
    const env = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF });
    expect(await env.client.pausedQueues()).toEqual([]);
    expect(await env.client.resumeQueue('default')).toBe(false);
    // Neither is served by a client or named by a step: a run on each makes them exist.
    await env.client.enqueue('quick', {}, { queue: 'reports' });
    await env.client.enqueue('quick', {}, { queue: 'bulk' });

    expect(await env.client.pauseQueue('reports')).toBe(true);
    expect(await env.client.pauseQueue('bulk')).toBe(true);
    expect(await env.client.pauseQueue('bulk')).toBe(false);
    expect((await env.client.pausedQueues()).sort()).toEqual(['bulk', 'reports']);

    for (const bad of ['', '   ', 'q'.repeat(201), 42, null, undefined]) {
      await expectCycloneError(env.client.pauseQueue(bad as string), InvalidOptionError, 'invalid_option');
      await expectCycloneError(env.client.resumeQueue(bad as string), InvalidOptionError, 'invalid_option');
    }
    // Refused calls changed nothing.
    expect((await env.client.pausedQueues()).sort()).toEqual(['bulk', 'reports']);

    expect(await env.client.resumeQueue('bulk')).toBe(true);
    expect(await env.client.resumeQueue('bulk')).toBe(false);
    expect(await env.client.pausedQueues()).toEqual(['reports']);
  });

  it('refuses a queue that does not exist with QueueNotFoundError and pauses nothing; a queue another client serves exists once it has started', async () => {
    const env = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF });
    for (const change of [(q: string) => env.client.pauseQueue(q), (q: string) => env.client.resumeQueue(q)]) {
      const err = await expectCycloneError(change('served_elsewhere'), QueueNotFoundError, 'queue_not_found');
      expect(err.queue).toBe('served_elsewhere');
      expect(err.message).toContain('Queue "served_elsewhere" does not exist');
    }
    expect(await env.client.pausedQueues()).toEqual([]);

    // A worker of that queue starts: it exists from then on, before any run is on it, and after that client stops.
    const worker = await replicaOf(env, { queues: { served_elsewhere: { workers: 1 } }, pollInterval: POLLING_OFF });
    await worker.close();
    expect(await env.client.pauseQueue('served_elsewhere')).toBe(true);
    expect(await env.client.pausedQueues()).toEqual(['served_elsewhere']);
    expect(await env.client.resumeQueue('served_elsewhere')).toBe(true);
  });
});
