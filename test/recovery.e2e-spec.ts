import { describe, it, expect } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { RunFailedError, Step, WAKE_CHANNEL, type StepContext } from 'cyclone-nestjs';
import { NotificationListener } from '../libs/cyclone/src/notifications/notification-listener.js';
import { RecoverySweeper, type RecoveryOutcome } from '../libs/cyclone/src/maintenance/recovery.sweeper.js';
import type { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { expectCycloneError, untilDatabaseTime, untilRunningStepsLapse } from './support/e2e-helpers.js';
import { HandlerProbe, POLLING_OFF, claimAsDeadWorker, firstPollTick, stepOf, testEnvs } from './support/handler-probe.js';
import { waitFor } from './support/wait.js';
import { sql } from './support/sql.js';

const probe = new HandlerProbe();

@Injectable()
class RecoverySteps {
  @Step('held')
  async held(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }

  /** Claimed only by dead workers in these tests. */
  @Step('stranded')
  async stranded(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }

  @Step('stranded_timeout', { timeout: 200, maxAttempts: 1 })
  async strandedTimeout(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }
}

const { createEnv, replicaOf } = testEnvs([RecoverySteps], probe);

const sweep = (env: CycloneTestEnv) => env.app.get(RecoverySweeper).sweep();

const failureOf = (env: CycloneTestEnv, runId: string) =>
  expectCycloneError(env.client.result(runId, { timeout: 10_000 }), RunFailedError, 'run_failed');

describe('the recovery sweep', () => {
  it('many replicas sweeping at once apply each outcome exactly once', async () => {
    // Polling off everywhere: only the sweeps called below run (after each client's startup tick).
    const base = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF });
    const replicas = [base];
    for (let i = 0; i < 3; i += 1) replicas.push(await replicaOf(base, { runWorkers: false, pollInterval: POLLING_OFF }));
    await Promise.all(replicas.map(firstPollTick));

    const crashed = await base.client.enqueueMany('stranded', Array.from({ length: 40 }, (_, n) => ({ n })));
    const wedged = await base.client.enqueueMany('stranded_timeout', Array.from({ length: 20 }, (_, n) => ({ n })), {
      maxAttempts: 3,
    });
    expect(await claimAsDeadWorker(base, ['stranded'], { leaseTtlMs: 1 })).toHaveLength(40);
    // A live lease, but a timeout (200 ms) that elapses on the database clock.
    expect(await claimAsDeadWorker(base, ['stranded_timeout'], { leaseTtlMs: 60_000 })).toHaveLength(20);
    await untilRunningStepsLapse(base);

    const passes = await Promise.all(replicas.flatMap((r) => [sweep(r), sweep(r), sweep(r)]));
    const outcomes = passes.flat();
    expect(outcomes.filter((o) => o === 'reclaimed')).toHaveLength(40);
    expect(outcomes.filter((o) => o === 'timeout')).toHaveLength(20);
    expect(outcomes).toHaveLength(60);

    const rows = await sql<{ run_id: string; state: string; attempt: number; reclaims: number; error_kind: string | null }>(
      base,
      'SELECT run_id, state, attempt, reclaims, error_kind FROM cyclone_steps',
    );
    for (const row of rows.filter((r) => crashed.includes(r.run_id))) {
      expect(row).toMatchObject({ state: 'available', attempt: 1, reclaims: 1, error_kind: null });
    }
    for (const row of rows.filter((r) => wedged.includes(r.run_id))) {
      expect(row).toMatchObject({ state: 'available', attempt: 2, reclaims: 0, error_kind: 'timeout' });
    }
    expect(await Promise.all(replicas.map(sweep))).toEqual([[], [], [], []]);
  });

  it('takes at most 100 candidates a pass', async () => {
    const env = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF });
    await firstPollTick(env);
    await env.client.enqueueMany('stranded', Array.from({ length: 130 }, (_, n) => ({ n })));
    expect(await claimAsDeadWorker(env, ['stranded'])).toHaveLength(130);
    await untilRunningStepsLapse(env);

    const running = async () =>
      (await sql<{ n: number }>(env, "SELECT count(*)::int AS n FROM cyclone_steps WHERE state = 'running'"))[0].n;
    const first = await sweep(env);
    expect(first).toHaveLength(100);
    expect(new Set(first)).toEqual(new Set<RecoveryOutcome>(['reclaimed']));
    expect(await running()).toBe(30);
    expect(await sweep(env)).toHaveLength(30);
    expect(await running()).toBe(0);
  });

  it('a reclaimed step keeps its scheduled_at and is claimed at once, with no backoff', async () => {
    const base = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF });
    const scheduledAt = new Date(Date.now() - 10 * 60_000);
    const runId = await base.client.enqueue('held', {}, { processAt: scheduledAt });
    await claimAsDeadWorker(base, ['held'], { leaseTtlMs: 60_000 });
    // A worker with polling off: only a wake-up can make it look.
    const worker = await replicaOf(base, { pollInterval: POLLING_OFF });
    await firstPollTick(worker);
    await firstPollTick(base);
    await sql(base, "UPDATE cyclone_steps SET lease_expiry = now() - interval '1 second' WHERE run_id = $1", [runId]);

    expect(await sweep(base)).toEqual(['reclaimed']);
    const reclaimed = await sql<{ claimable: boolean }>(
      base,
      'SELECT scheduled_at <= now() AS claimable FROM cyclone_steps WHERE run_id = $1',
      [runId],
    );
    expect(reclaimed).toEqual([{ claimable: true }]);
    // The reclaim's wake-up reaches the worker, which claims it at once (its own poll is a minute away).
    const call = await probe.call(runId, 0, 5_000);
    expect(call).toMatchObject({ attempt: 1, reclaims: 1 });
    const step = await stepOf(base, runId);
    expect(step.scheduledAt).toEqual(scheduledAt);
    expect(step).toMatchObject({ state: 'running', attempt: 1, reclaims: 1, error: null });
    call.release('ok');
    await expect(worker.client.result(runId, { timeout: 10_000 })).resolves.toBe('ok');
  });

  it('a step discarded for reclaim_limit or an elapsed timeout fails its run', async () => {
    const env = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF });
    await firstPollTick(env);
    const crashLoop = await env.client.enqueue('stranded', {}, { maxReclaims: 0 });
    const wedged = await env.client.enqueue('stranded_timeout', {});
    await claimAsDeadWorker(env, ['stranded'], { leaseTtlMs: 1 });
    await claimAsDeadWorker(env, ['stranded_timeout'], { leaseTtlMs: 60_000 });
    await untilRunningStepsLapse(env);

    expect((await sweep(env)).sort()).toEqual(['reclaim_limit', 'timeout_discarded']);
    expect((await env.client.getRun(crashLoop)).state).toBe('failed');
    expect((await env.client.getRun(wedged)).state).toBe('failed');
    expect((await failureOf(env, crashLoop)).failedSteps).toEqual([
      { nodeId: 'stranded', error: expect.stringMatching(/reclaim/), errorKind: 'reclaim_limit' },
    ]);
    expect((await failureOf(env, wedged)).failedSteps).toEqual([
      { nodeId: 'stranded_timeout', error: expect.stringMatching(/timed out/), errorKind: 'timeout' },
    ]);
    expect(await stepOf(env, wedged)).toMatchObject({ state: 'discarded', attempt: 1, reclaims: 0 });
  });

  it('re-wakes a queue whose due job got no wake-up, once it has waited past the threshold', async () => {
    // The worker polls once a minute; its job becomes due later, so no NOTIFY is ever sent for it.
    const worker = await createEnv({ pollInterval: POLLING_OFF });
    await firstPollTick(worker);
    const runId = await worker.client.enqueue('held', {}, { processIn: 200 });
    const dueAt = (await stepOf(worker, runId)).scheduledAt.getTime();
    // A replica that polls quickly: its threshold is 5 × its longest poll interval, at least 5 s.
    const sweeper = await replicaOf(worker, { runWorkers: false, pollInterval: [50, 200] });
    const heard: string[] = [];
    worker.app.get(NotificationListener).on(WAKE_CHANNEL, (queue) => heard.push(queue));

    // Due for 2.5 s, below the threshold: neither this sweep nor the replica's own wake the queue.
    await untilDatabaseTime(sweeper, new Date(dueAt + 2_500));
    expect(await sweep(sweeper)).toEqual([]);
    // A NOTIFY sent now reaches the worker after any wake-up those sweeps sent: none came before it.
    await sql(sweeper, `SELECT pg_notify('${WAKE_CHANNEL}', 'marker')`);
    await waitFor('the marker', () => heard.includes('marker'));
    expect(heard).toEqual(['marker']);
    expect(probe.of(runId)).toHaveLength(0);
    expect((await stepOf(worker, runId)).state).toBe('available');

    await untilDatabaseTime(sweeper, new Date(dueAt + 5_100));
    await sweep(sweeper);
    const call = await probe.call(runId, 0, 3_000);
    expect(call.startedAt - dueAt).toBeGreaterThanOrEqual(4_900);
    call.release('woken');
    await expect(worker.client.result(runId, { timeout: 10_000 })).resolves.toBe('woken');
  });
});
