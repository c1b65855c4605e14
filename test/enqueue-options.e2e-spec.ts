import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import {
  DuplicateError,
  RunFailedError,
  RunNotFoundError,
  Step,
  CycloneStats,
  type EnqueueOptions,
  type StepContext,
} from 'cyclone-nestjs';
import { RetentionSweeper } from '../libs/cyclone/src/maintenance/retention.sweeper.js';
import { CycloneTestEnv, type CycloneTestEnvOptions } from 'cyclone-nestjs/testing';
import { deferred, expectCycloneError, rowsOfRun, untilDatabaseTime } from './support/e2e-helpers.js';
import { sleep } from './support/wait.js';
import { sql } from './support/sql.js';
import { claimReads } from './support/statement-reads.js';

/** Names of `record` jobs in the order their handlers started. */
const executed: string[] = [];
/** Gates that hold `gated` jobs until the test opens them, by key. */
const gates = new Map<string, Promise<void>>();
let failedAttempts = 0;

@Injectable()
class Steps {
  @Step('record')
  async record(input: { name: string }) {
    executed.push(input.name);
    return { name: input.name };
  }

  @Step('bulk_report', { queue: 'bulk' })
  async bulkReport(input: { name: string }) {
    return { name: input.name };
  }

  @Step('sleepy', { timeout: '5m' })
  async sleepy(_input: unknown, ctx: StepContext) {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, 15_000);
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(ctx.signal.reason);
      });
    });
    return 'woke up';
  }

  @Step('gated')
  async gated(input: { key: string }) {
    await gates.get(input.key);
    return { key: input.key };
  }

  @Step('always_fails', { maxAttempts: 6, backoff: () => 10 })
  async alwaysFails(): Promise<never> {
    failedAttempts += 1;
    throw new Error(`failure #${failedAttempts}`);
  }

  @Step('ephemeral', { retention: '1ms' })
  async ephemeral() {
    return 'gone soon';
  }

  @Step('fragile', { maxReclaims: 4 })
  async fragile() {
    return 'ok';
  }
}

/** Another client on the same database as `env`, e.g. one that serves other queues. */
function replicaOf(env: CycloneTestEnv, options: CycloneTestEnvOptions): Promise<CycloneTestEnv> {
  return CycloneTestEnv.create({ providers: [Steps], databaseUrl: env.databaseUrl, isolate: false, ...options });
}

describe('enqueue options', () => {
  let env: CycloneTestEnv;
  beforeAll(async () => {
    // Serves only the default queue; module default of maxReclaims is 7.
    env = await CycloneTestEnv.create({ providers: [Steps], queues: { default: { workers: 2 } }, maxReclaims: 7 });
  });
  afterAll(async () => env?.close());

  /** The only step of a standalone job. */
  const stepOf = async (runId: string) => (await env.client.listSteps(runId))[0];
  /** Enqueues a `record` job that nobody claims for an hour, to inspect what was stored. */
  const parked = (opts: EnqueueOptions = {}) => env.client.enqueue('record', { name: 'parked' }, { processIn: '1h', ...opts });

  describe('queue', () => {
    it('a job on queue "bulk" is run only by a client that serves "bulk"', async () => {
      const runId = await env.client.enqueue('record', { name: 'on-bulk' }, { queue: 'bulk' });
      expect((await env.client.getRun(runId)).queue).toBe('bulk');
      expect(await stepOf(runId)).toMatchObject({ queue: 'bulk', state: 'available' });

      // The default-queue client has looked for work, several times over.
      await env.waitForPasses('cyclone:claim', 3);
      expect(await stepOf(runId)).toMatchObject({ state: 'available', startedAt: null });
      expect(executed).not.toContain('on-bulk');

      const bulk = await replicaOf(env, { queues: { bulk: { workers: 1 } } });
      try {
        await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ name: 'on-bulk' });
        expect((await stepOf(runId)).leaseOwner).toBe(bulk.app.get(CycloneStats).clientId);
      } finally {
        await bulk.close();
      }
    });

    it('a step\'s queue is the default for its jobs, and the enqueue option wins over it', async () => {
      const onStepQueue = await env.client.enqueue('bulk_report', { name: 'a' }, { processIn: '1h' });
      expect(await stepOf(onStepQueue)).toMatchObject({ queue: 'bulk' });

      const overridden = await env.client.enqueue('bulk_report', { name: 'b' }, { queue: 'default' });
      expect(await stepOf(overridden)).toMatchObject({ queue: 'default' });
      await expect(env.client.result(overridden, { timeout: 10_000 })).resolves.toEqual({ name: 'b' });
      expect((await stepOf(overridden)).leaseOwner).toBe(env.app.get(CycloneStats).clientId);
      await env.client.cancel(onStepQueue);
    });
  });

  describe('priority', () => {
    it('with one worker, jobs run by priority (highest first), then earlier scheduled time, then insertion order', async () => {
      // Enqueue everything before any worker exists, then drain with a single worker.
      const producer = await CycloneTestEnv.create({ providers: [Steps], runWorkers: false });
      try {
        const jobs: [string, EnqueueOptions][] = [
          ['a', { priority: 0 }],
          ['b', { priority: 10 }],
          ['c', { priority: -5 }],
          ['d', { priority: 10 }],
          ['e', { priority: 0, processAt: new Date(Date.now() - 60_000) }],
          ['f', {}],
          ['g', { priority: 1000 }],
        ];
        const ids: string[] = [];
        for (const [name, opts] of jobs) ids.push(await producer.client.enqueue('record', { name }, opts));
        expect((await producer.client.listSteps(ids[1]))[0].priority).toBe(10);
        expect((await producer.client.listSteps(ids[5]))[0].priority).toBe(0);

        executed.length = 0;
        const drainer = await replicaOf(producer, { workers: 1 });
        try {
          for (const id of ids) await drainer.runUntilComplete(id, { timeout: 15_000 });
        } finally {
          await drainer.close();
        }
        expect(executed).toEqual(['g', 'b', 'd', 'e', 'a', 'f', 'c']);
      } finally {
        await producer.close();
      }
    });
    it('steps due later at a higher priority do not slow the claim of due ones', async () => {
      const producer = await CycloneTestEnv.create({ providers: [Steps], runWorkers: false });
      try {
        await producer.client.enqueueMany('record', Array.from({ length: 20 }, (_, i) => ({ name: `due ${i}` })));
        // What a claim of five reads (rolled back, so the same five are there each time).
        const reads = () => claimReads(producer.databaseUrl, 'record', 5, 5);
        const without = await reads();
        // A burst of delayed (or backing-off) steps of a higher priority.
        await producer.client.enqueueMany(
          'record',
          Array.from({ length: 20_000 }, (_, i) => ({ name: `later ${i}` })),
          { priority: 5, processIn: '1h' },
        );
        await sql(producer, 'VACUUM ANALYZE cyclone_steps');
        const withLater = await reads();
        // A probe or two of each month's index, not a walk over the 20,000
        // entries (on PostgreSQL 15, one scan in claim order read 240 more pages).
        expect(withLater).toBeLessThan(without + 120);
      } finally {
        await producer.close();
      }
    });
  });

  describe('processIn and processAt', () => {
    it('a delayed job is not claimed before its time, measured on the database clock', async () => {
      const processAt = new Date(Date.now() + 3_000);
      const delayedIn = await env.client.enqueue('record', { name: 'in' }, { processIn: '3s' });
      const delayedAt = await env.client.enqueue('record', { name: 'at' }, { processAt });

      const inStep = await stepOf(delayedIn);
      const inRun = await env.client.getRun(delayedIn);
      // scheduled_at and created_at come from the same database transaction.
      expect(inStep.scheduledAt.getTime() - inRun.createdAt.getTime()).toBe(3_000);
      expect((await stepOf(delayedAt)).scheduledAt.getTime()).toBe(processAt.getTime());

      // The workers have looked several times, and it is still before both are due.
      await env.waitForPasses('cyclone:claim', 3);
      const [{ early }] = await sql(env, 'SELECT clock_timestamp() < $1 AS early', [inStep.scheduledAt]);
      expect(early).toBe(true);
      for (const id of [delayedIn, delayedAt]) {
        expect(await stepOf(id)).toMatchObject({ state: 'available', startedAt: null });
      }

      await env.runUntilComplete(delayedIn, { timeout: 15_000 });
      await env.runUntilComplete(delayedAt, { timeout: 15_000 });
      const ran = await stepOf(delayedIn);
      expect(ran.state).toBe('completed');
      expect(ran.startedAt!.getTime() - inRun.createdAt.getTime()).toBeGreaterThanOrEqual(3_000);
      expect(ran.startedAt!.getTime() - ran.scheduledAt.getTime()).toBeLessThan(5_000);
      const ranAt = await stepOf(delayedAt);
      expect(ranAt.state).toBe('completed');
      expect(ranAt.startedAt!.getTime()).toBeGreaterThanOrEqual(processAt.getTime());
      expect(ranAt.startedAt!.getTime() - processAt.getTime()).toBeLessThan(5_000);
    });

    it('a processAt in the past and a processIn of 0 run at once', async () => {
      const past = await env.client.enqueue('record', { name: 'past' }, { processAt: new Date(Date.now() - 3_600_000) });
      const zero = await env.client.enqueue('record', { name: 'zero' }, { processIn: 0 });
      await expect(env.client.result(past, { timeout: 10_000 })).resolves.toEqual({ name: 'past' });
      await expect(env.client.result(zero, { timeout: 10_000 })).resolves.toEqual({ name: 'zero' });
    });
  });

  describe('timeout', () => {
    it('is stored per attempt; the enqueue option wins over the step\'s, and no timeout is null', async () => {
      const stepDefault = await env.client.enqueue('sleepy', {}, { processIn: '1h' });
      const overridden = await env.client.enqueue('sleepy', {}, { processIn: '1h', timeout: '2s' });
      const none = await parked();
      expect((await stepOf(stepDefault)).timeoutMs).toBe(300_000);
      expect((await stepOf(overridden)).timeoutMs).toBe(2_000);
      expect((await stepOf(none)).timeoutMs).toBeNull();
      for (const id of [stepDefault, overridden, none]) await env.client.cancel(id);
    });

    it('a handler that runs past the enqueue timeout is aborted and its attempt recorded as a timeout', async () => {
      const started = Date.now();
      const runId = await env.client.enqueue('sleepy', {}, { timeout: 300, maxAttempts: 1 });
      const err = await expectCycloneError(env.client.result(runId, { timeout: 10_000 }), RunFailedError, 'run_failed');
      // Far sooner than the step's own 5 minutes or the handler's 15 s.
      expect(Date.now() - started).toBeLessThan(8_000);
      expect(err.failedSteps).toEqual([expect.objectContaining({ nodeId: 'sleepy', errorKind: 'timeout' })]);
      expect(await stepOf(runId)).toMatchObject({ state: 'discarded', errorKind: 'timeout', timeoutMs: 300, attempt: 1 });
    });

    it('a timeout longer than a Node timer holds (30 days) does not end the attempt early', async () => {
      // The handler takes a moment, so a deadline that fired early would catch it.
      gates.set('long-timeout', sleep(300));
      const runId = await env.client.enqueue('gated', { key: 'long-timeout' }, { timeout: '30d', maxAttempts: 1 });
      await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ key: 'long-timeout' });
      expect(await stepOf(runId)).toMatchObject({ state: 'completed', timeoutMs: 30 * 86_400_000, errorKind: null });
    });
  });

  describe('maxAttempts', () => {
    it('the enqueue option wins over the step\'s: a handler that always throws runs exactly that many times', async () => {
      failedAttempts = 0;
      const runId = await env.client.enqueue('always_fails', {}, { maxAttempts: 3 });
      expect((await stepOf(runId)).maxAttempts).toBe(3);
      const err = await expectCycloneError(env.client.result(runId, { timeout: 10_000 }), RunFailedError, 'run_failed');
      expect(err.failedSteps).toEqual([{ nodeId: 'always_fails', error: 'failure #3', errorKind: 'error' }]);
      expect(await stepOf(runId)).toMatchObject({ state: 'discarded', attempt: 3, maxAttempts: 3, errorKind: 'error' });
      expect((await env.client.getRun(runId)).state).toBe('failed');
      // The workers look again, past any backoff of 10 ms: no fourth attempt comes.
      await env.waitForPasses('cyclone:claim', 2);
      expect(failedAttempts).toBe(3);
    });
  });

  describe('retention', () => {
    it('the retention sweeper deletes a finished run past its retention, with its steps, and keeps the others', async () => {
      const shortLived = await env.client.enqueue('record', { name: 'short' }, { retention: '1ms' });
      const stepRetention = await env.client.enqueue('ephemeral', {});
      const cancelled = await parked({ retention: 1 });
      const kept = await env.client.enqueue('record', { name: 'kept' });
      const unfinished = await parked({ retention: '1ms' });
      for (const id of [shortLived, stepRetention, kept]) await env.runUntilComplete(id);
      await env.client.cancel(cancelled);
      // The last of them to finish is past its retention of 1 ms.
      await untilDatabaseTime(env, new Date((await env.client.getRun(cancelled)).finishedAt!.getTime() + 1));

      const deleted = await env.app.get(RetentionSweeper).sweep();
      expect(deleted).toBeGreaterThanOrEqual(3);

      for (const id of [shortLived, stepRetention, cancelled]) {
        await expectCycloneError(env.client.getRun(id), RunNotFoundError, 'run_not_found');
        await expectCycloneError(env.client.listSteps(id), RunNotFoundError, 'run_not_found');
        expect(await rowsOfRun(env, id)).toEqual({ runs: 0, steps: 0 });
      }
      // The default retention (7 days) keeps a finished run; an unfinished run is never swept.
      expect((await env.client.getRun(kept)).state).toBe('completed');
      expect(await rowsOfRun(env, kept)).toEqual({ runs: 1, steps: 1 });
      expect((await env.client.getRun(unfinished)).state).toBe('running');
      await env.client.cancel(unfinished);
    });
  });

  describe('unique', () => {
    it('a second enqueue with a held key throws DuplicateError naming the holder; once it completes the key is free', async () => {
      const gate = deferred();
      gates.set('u1', gate.promise);
      const first = await env.client.enqueue('gated', { key: 'u1' }, { unique: 'user:99' });
      expect((await env.client.getRun(first)).uniqueKey).toBe('user:99');

      const dup = await expectCycloneError(
        env.client.enqueue('gated', { key: 'u1' }, { unique: 'user:99' }),
        DuplicateError,
        'duplicate',
      );
      expect(dup.runId).toBe(first);
      expect(dup.uniqueKey).toBe('user:99');
      const [{ count }] = await env.dataSource.query(`SELECT count(*)::int AS count FROM cyclone_runs WHERE unique_key = 'user:99'`);
      expect(count).toBe(1);

      // Another key is independent.
      const other = await env.client.enqueue('record', { name: 'other-key' }, { unique: 'user:100' });
      expect(other).not.toBe(first);

      gate.resolve();
      await env.runUntilComplete(first);
      const again = await env.client.enqueue('gated', { key: 'u1' }, { unique: 'user:99' });
      expect(again).not.toBe(first);
      await expect(env.client.result(again, { timeout: 10_000 })).resolves.toEqual({ key: 'u1' });
      await env.runUntilComplete(other);
    });

    it('cancelling the holder frees the key', async () => {
      const holder = await parked({ unique: 'nightly' });
      const dup = await expectCycloneError(parked({ unique: 'nightly' }), DuplicateError, 'duplicate');
      expect(dup.runId).toBe(holder);
      await env.client.cancel(holder);
      const next = await parked({ unique: 'nightly' });
      expect(next).not.toBe(holder);
      await env.client.cancel(next);
    });
  });

  describe('maxReclaims', () => {
    it('is stored on the step: the enqueue option over the step\'s over the module\'s', async () => {
      const perEnqueue = await parked({ maxReclaims: 2 });
      const zero = await parked({ maxReclaims: 0 });
      const fromStep = await env.client.enqueue('fragile', {}, { processIn: '1h' });
      const fromModule = await parked();
      expect((await stepOf(perEnqueue)).maxReclaims).toBe(2);
      expect((await stepOf(zero)).maxReclaims).toBe(0);
      expect((await stepOf(fromStep)).maxReclaims).toBe(4);
      expect((await stepOf(fromModule)).maxReclaims).toBe(7);
      expect((await stepOf(fromModule)).reclaims).toBe(0);
      for (const id of [perEnqueue, zero, fromStep, fromModule]) await env.client.cancel(id);
    });
  });
});
