import { describe, it, expect, beforeAll, afterAll, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import {
  CycloneDatabase,
  DuplicateError,
  InvalidStateError,
  ResultTimeoutError,
  RunCancelledError,
  RunFailedError,
  Step,
  StepNotFoundError,
  type EnqueueOptions,
  type StepContext,
} from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { deferred, expectCycloneError } from './support/e2e-helpers.js';
import { waitFor } from './support/wait.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What the test wants a `flaky` job with a given key to do, and the attempts it saw. */
interface Control {
  fail: boolean;
  gate?: Promise<void>;
  attempts: number[];
}
const controls = new Map<string, Control>();
function control(key: string, fail: boolean): Control {
  const c: Control = { fail, attempts: [] };
  controls.set(key, c);
  return c;
}

const notified: unknown[] = [];

@Injectable()
class Steps {
  @Step('double')
  async double(input: { n: number }) {
    return { n: input.n * 2 };
  }

  @Step('notify')
  async notify(input: { to: string }) {
    notified.push(input);
  }

  @Step('smtp', { maxAttempts: 1 })
  async smtp(): Promise<never> {
    throw new Error('smtp down');
  }

  @Step('flaky', { maxAttempts: 1 })
  async flaky(input: { key: string }, ctx: StepContext) {
    const c = controls.get(input.key)!;
    c.attempts.push(ctx.attempt);
    if (c.fail) throw new Error(`attempt ${ctx.attempt} failed`);
    await c.gate;
    return { attempt: ctx.attempt };
  }
}

describe('client calls on runs', () => {
  let env: CycloneTestEnv;
  beforeAll(async () => {
    env = await CycloneTestEnv.create({ providers: [Steps], workers: 2 });
  });
  afterAll(async () => env?.close());

  /** A job of kind `double` that nobody will claim for an hour. */
  const enqueueParked = (n = 1) => env.client.enqueue('double', { n }, { processIn: '1h' });

  describe('enqueue, getRun and listSteps', () => {
    it('enqueue returns the run id; getRun and listSteps describe the job before and after it runs', async () => {
      const runId = await env.client.enqueue('double', { n: 21 });
      expect(runId).toMatch(UUID);

      const before = await env.client.getRun(runId);
      expect(before).toMatchObject({ id: runId, kind: 'double', workflow: null, queue: 'default', input: { n: 21 }, uniqueKey: null });
      expect(before.createdAt).toBeInstanceOf(Date);

      await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ n: 42 });

      const after = await env.client.getRun(runId);
      expect(after.state).toBe('completed');
      expect(after.finishedAt).toBeInstanceOf(Date);
      expect(after.finishedAt!.getTime()).toBeGreaterThanOrEqual(after.createdAt.getTime());

      const steps = await env.client.listSteps(runId);
      expect(steps).toHaveLength(1);
      expect(steps[0]).toMatchObject({
        runId,
        nodeId: 'double',
        kind: 'double',
        state: 'completed',
        queue: 'default',
        attempt: 1,
        maxAttempts: 5,
        reclaims: 0,
        error: null,
        errorKind: null,
        output: { n: 42 },
      });
      expect(steps[0].startedAt).toBeInstanceOf(Date);
      expect(steps[0].finishedAt).toBeInstanceOf(Date);
    });

    it('listSteps shows a delayed job as available and unattempted', async () => {
      const runId = await enqueueParked(3);
      expect((await env.client.getRun(runId)).state).toBe('running');
      const [step] = await env.client.listSteps(runId);
      expect(step).toMatchObject({ nodeId: 'double', state: 'available', attempt: 1, reclaims: 0, startedAt: null });
      await env.client.cancel(runId);
    });

    it('enqueueAction runs a handler that returns nothing; its result and output are null', async () => {
      const runId = await env.client.enqueueAction('notify', { to: 'ada@example.com' });
      await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toBeNull();
      expect(notified).toContainEqual({ to: 'ada@example.com' });
      await expect(env.client.output(runId, 'notify')).resolves.toBeNull();
      expect((await env.client.listSteps(runId))[0]).toMatchObject({ state: 'completed', output: null });
    });
  });

  describe('enqueueMany', () => {
    it('inserts every job in one round trip and returns the ids in input order', async () => {
      const database = env.app.get(CycloneDatabase);
      const spy = jest.spyOn(database, 'query');
      let ids: string[];
      try {
        ids = await env.client.enqueueMany('double', [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }, { n: 5 }]);
        // Workers share the database object (claims, heartbeats): count only the statements that insert jobs.
        // (cyclone_insert_and_start_from inserts too, and starts the jobs an idle worker of this client takes.)
        const inserts = spy.mock.calls.filter(([stmt]) => /cyclone_insert_(jobs|and_start_from)\(/.test(stmt.text));
        expect(inserts).toHaveLength(1);
      } finally {
        spy.mockRestore();
      }
      expect(ids).toHaveLength(5);
      expect(new Set(ids).size).toBe(5);
      for (const id of ids) expect(id).toMatch(UUID);

      // In input order: the nth id is the run of the nth input.
      const runs = await Promise.all(ids.map((id) => env.client.getRun(id)));
      expect(runs.map((r) => r.input)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }, { n: 5 }]);
      // One statement, one transaction: every run has the same creation time.
      expect(new Set(runs.map((r) => r.createdAt.getTime())).size).toBe(1);

      const outputs = await Promise.all(ids.map((id) => env.client.result(id, { timeout: 10_000 })));
      expect(outputs).toEqual([{ n: 2 }, { n: 4 }, { n: 6 }, { n: 8 }, { n: 10 }]);
    });

    it('applies the options to every job and returns [] for no inputs', async () => {
      const ids = await env.client.enqueueMany('double', [{ n: 1 }, { n: 2 }], { processIn: '1h', priority: 7, maxAttempts: 2 });
      for (const id of ids) {
        expect((await env.client.listSteps(id))[0]).toMatchObject({ state: 'available', priority: 7, maxAttempts: 2 });
        await env.client.cancel(id);
      }
      await expect(env.client.enqueueMany('double', [])).resolves.toEqual([]);
    });
  });

  describe('result and output', () => {
    it('result throws RunFailedError carrying the discarded step and its error', async () => {
      const runId = await env.client.enqueue('smtp', {});
      const err = await expectCycloneError(env.client.result(runId, { timeout: 10_000 }), RunFailedError, 'run_failed');
      expect(err.runId).toBe(runId);
      expect(err.failedSteps).toEqual([{ nodeId: 'smtp', error: 'smtp down', errorKind: 'error' }]);
      expect(err.message).toContain('smtp down');
      expect((await env.client.getRun(runId)).state).toBe('failed');
      expect((await env.client.listSteps(runId))[0]).toMatchObject({
        state: 'discarded',
        attempt: 1,
        maxAttempts: 1,
        error: 'smtp down',
        errorKind: 'error',
      });
    });

    it('result throws RunCancelledError for a cancelled run', async () => {
      const runId = await enqueueParked();
      await env.client.cancel(runId);
      const err = await expectCycloneError(env.client.result(runId, { timeout: 5_000 }), RunCancelledError, 'run_cancelled');
      expect(err.runId).toBe(runId);
    });

    it('result wakes up when a run is cancelled while it waits', async () => {
      const runId = await enqueueParked();
      const waiting = env.client.result(runId, { timeout: 20_000 });
      setTimeout(() => void env.client.cancel(runId), 200);
      const started = Date.now();
      await expectCycloneError(waiting, RunCancelledError, 'run_cancelled');
      expect(Date.now() - started).toBeLessThan(10_000);
    });

    it('result gives up with ResultTimeoutError after its timeout, and the run goes on', async () => {
      const runId = await enqueueParked();
      const started = Date.now();
      const err = await expectCycloneError(env.client.result(runId, { timeout: 300 }), ResultTimeoutError, 'result_timeout');
      const waited = Date.now() - started;
      expect(waited).toBeGreaterThanOrEqual(250);
      expect(waited).toBeLessThan(5_000);
      expect(err.runId).toBe(runId);
      expect(err.state).toBe('running');
      expect((await env.client.getRun(runId)).state).toBe('running');
      await env.client.cancel(runId);
    });

    it('output(runId, nodeId) reads a completed node, and refuses a node without output or an unknown node', async () => {
      const done = await env.client.enqueue('double', { n: 5 });
      await env.runUntilComplete(done);
      await expect(env.client.output(done, 'double')).resolves.toEqual({ n: 10 });
      await expectCycloneError(env.client.output(done, 'nope'), StepNotFoundError, 'step_not_found');

      const parked = await enqueueParked();
      const err = await expectCycloneError(env.client.output(parked, 'double'), InvalidStateError, 'invalid_state');
      expect(err.state).toBe('available');
      await env.client.cancel(parked);
    });
  });

  describe('cancel', () => {
    it('cancels a pending delayed job: run and step cancelled, returns true; a second cancel returns false', async () => {
      const runId = await enqueueParked(8);
      await expect(env.client.cancel(runId)).resolves.toBe(true);
      const run = await env.client.getRun(runId);
      expect(run.state).toBe('cancelled');
      expect(run.finishedAt).toBeInstanceOf(Date);
      const [step] = await env.client.listSteps(runId);
      expect(step).toMatchObject({ state: 'cancelled', attempt: 1, error: null, startedAt: null });
      await expect(env.client.cancel(runId)).resolves.toBe(false);
    });

    it('returns false for a completed run and leaves it completed with its output', async () => {
      const runId = await env.client.enqueue('double', { n: 4 });
      await env.runUntilComplete(runId);
      await expect(env.client.cancel(runId)).resolves.toBe(false);
      expect((await env.client.getRun(runId)).state).toBe('completed');
      expect((await env.client.listSteps(runId))[0].state).toBe('completed');
      await expect(env.client.result(runId)).resolves.toEqual({ n: 8 });
    });
  });

  describe('retry and retryAll', () => {
    /** Enqueues a `flaky` job that fails its first attempt and waits until its run has failed. */
    async function failedRun(key: string, opts: EnqueueOptions = {}): Promise<{ runId: string; c: Control }> {
      const c = control(key, true);
      const runId = await env.client.enqueue('flaky', { key }, opts);
      await expectCycloneError(env.client.result(runId, { timeout: 10_000 }), RunFailedError, 'run_failed');
      expect((await env.client.listSteps(runId))[0]).toMatchObject({
        state: 'discarded',
        attempt: 1,
        maxAttempts: 1,
        error: 'attempt 1 failed',
        errorKind: 'error',
      });
      return { runId, c };
    }

    it('retry reopens a discarded step for exactly one more attempt; the run runs again and completes', async () => {
      const { runId, c } = await failedRun('retry-ok');
      c.fail = false;
      const gate = deferred();
      c.gate = gate.promise;

      await env.client.retry(runId, 'flaky');

      // The reopened attempt is running: the run is running again, the error is gone.
      const running = await waitFor('the retried step to run',async () => {
        const [step] = await env.client.listSteps(runId);
        return step.state === 'running' ? step : undefined;
      },10_000);
      expect(running).toMatchObject({ attempt: 2, maxAttempts: 2, error: null, errorKind: null, reclaims: 0 });
      const run = await env.client.getRun(runId);
      expect(run.state).toBe('running');
      expect(run.finishedAt).toBeNull();

      gate.resolve();
      await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ attempt: 2 });
      expect((await env.client.listSteps(runId))[0]).toMatchObject({
        state: 'completed',
        attempt: 2,
        maxAttempts: 2,
        error: null,
        errorKind: null,
      });
      expect(c.attempts).toEqual([1, 2]);
    });

    it('a retried step that fails again is discarded after that one attempt', async () => {
      const { runId, c } = await failedRun('retry-fails-again');
      await env.client.retry(runId, 'flaky');
      const err = await expectCycloneError(env.client.result(runId, { timeout: 10_000 }), RunFailedError, 'run_failed');
      expect(err.failedSteps).toEqual([{ nodeId: 'flaky', error: 'attempt 2 failed', errorKind: 'error' }]);
      expect((await env.client.listSteps(runId))[0]).toMatchObject({ state: 'discarded', attempt: 2, maxAttempts: 2 });
      expect(c.attempts).toEqual([1, 2]);
    });

    it('retryAll reopens every discarded step and returns how many; the run completes', async () => {
      const { runId, c } = await failedRun('retry-all');
      c.fail = false;
      await expect(env.client.retryAll(runId)).resolves.toBe(1);
      await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ attempt: 2 });
      expect((await env.client.listSteps(runId))[0]).toMatchObject({ state: 'completed', attempt: 2, maxAttempts: 2, error: null });
      expect(c.attempts).toEqual([1, 2]);
      // Nothing is discarded any more.
      await expect(env.client.retryAll(runId)).resolves.toBe(0);
    });

    it('retry of a step that is not discarded throws InvalidStateError and changes nothing', async () => {
      const completed = await env.client.enqueue('double', { n: 1 });
      await env.runUntilComplete(completed);
      const onCompleted = await expectCycloneError(env.client.retry(completed, 'double'), InvalidStateError, 'invalid_state');
      expect(onCompleted.state).toBe('completed');
      expect((await env.client.listSteps(completed))[0]).toMatchObject({ state: 'completed', attempt: 1, maxAttempts: 5 });

      const parked = await enqueueParked();
      const onAvailable = await expectCycloneError(env.client.retry(parked, 'double'), InvalidStateError, 'invalid_state');
      expect(onAvailable.state).toBe('available');
      expect((await env.client.listSteps(parked))[0]).toMatchObject({ state: 'available', attempt: 1, maxAttempts: 5 });

      await env.client.cancel(parked);
      const onCancelled = await expectCycloneError(env.client.retry(parked, 'double'), InvalidStateError, 'invalid_state');
      expect(onCancelled.state).toBe('cancelled');
      expect((await env.client.getRun(parked)).state).toBe('cancelled');
      await expect(env.client.retryAll(parked)).resolves.toBe(0);
    });

    it('retry of a failed run whose unique key a newer run now holds throws DuplicateError naming that run', async () => {
      const { runId } = await failedRun('retry-unique', { unique: 'account:7' });
      // A failed run no longer holds its key.
      const newer = await env.client.enqueue('double', { n: 7 }, { unique: 'account:7', processIn: '1h' });
      const err = await expectCycloneError(env.client.retry(runId, 'flaky'), DuplicateError, 'duplicate');
      expect(err.runId).toBe(newer);
      expect((await env.client.getRun(runId)).state).toBe('failed');
      expect((await env.client.listSteps(runId))[0]).toMatchObject({ state: 'discarded', attempt: 1, maxAttempts: 1 });
      await env.client.cancel(newer);
      // With the key free again, the retry goes through.
      controls.get('retry-unique')!.fail = false;
      await env.client.retry(runId, 'flaky');
      await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ attempt: 2 });
    });

    it('retry of a node the run does not have throws StepNotFoundError', async () => {
      const { runId } = await failedRun('retry-unknown-node');
      const err = await expectCycloneError(env.client.retry(runId, 'no_such_node'), StepNotFoundError, 'step_not_found');
      expect(err).toMatchObject({ runId, nodeId: 'no_such_node' });
      expect((await env.client.getRun(runId)).state).toBe('failed');
    });
  });
});
