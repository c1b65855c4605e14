import { describe, it, expect, beforeAll, afterAll, beforeEach } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { PermanentError, RunFailedError, Step, permanent, type StepContext } from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { expectCycloneError } from './support/e2e-helpers.js';
import { waitFor } from './support/wait.js';

/** Every handler call: which kind, which attempt, when (worker clock). */
const calls: { kind: string; attempt: number; at: number }[] = [];
const backoffArgs: number[] = [];
const MAX_PAYLOAD_BYTES = 4_096;

function called(ctx: StepContext): void {
  calls.push({ kind: ctx.kind, attempt: ctx.attempt, at: Date.now() });
}
const attemptsOf = (kind: string) => calls.filter((c) => c.kind === kind).map((c) => c.attempt);

function cyclic(): object {
  const node: { self?: unknown } = {};
  node.self = node;
  return node;
}

@Injectable()
class Steps {
  @Step('always_fails', { maxAttempts: 4, backoff: () => 10 })
  async alwaysFails(_input: unknown, ctx: StepContext): Promise<never> {
    called(ctx);
    throw new Error(`attempt ${ctx.attempt} failed`);
  }

  @Step('slow_retry', {
    maxAttempts: 2,
    backoff: (attempt) => {
      backoffArgs.push(attempt);
      return 1_500;
    },
  })
  async slowRetry(_input: unknown, ctx: StepContext) {
    called(ctx);
    if (ctx.attempt === 1) throw new Error('first attempt fails');
    return { attempt: ctx.attempt };
  }

  @Step('string_backoff', { maxAttempts: 3, backoff: () => '20ms' })
  async stringBackoff(_input: unknown, ctx: StepContext) {
    called(ctx);
    if (ctx.attempt < 3) throw new Error('not yet');
    return 'third time lucky';
  }

  @Step('invalid_backoff', { maxAttempts: 2, backoff: () => 'soon' })
  async invalidBackoff(_input: unknown, ctx: StepContext) {
    called(ctx);
    if (ctx.attempt === 1) throw new Error('first attempt fails');
    return 'recovered';
  }

  @Step('throwing_backoff', {
    maxAttempts: 2,
    backoff: () => {
      throw new Error('backoff bug');
    },
  })
  async throwingBackoff(_input: unknown, ctx: StepContext) {
    called(ctx);
    if (ctx.attempt === 1) throw new Error('first attempt fails');
    return 'recovered';
  }

  @Step('permanent', { maxAttempts: 5, backoff: () => 10 })
  async permanentFailure(input: { how: 'class' | 'wrap-error' | 'wrap-string' | 'second-attempt' }, ctx: StepContext): Promise<never> {
    called(ctx);
    switch (input.how) {
      case 'class':
        throw new PermanentError('bad address');
      case 'wrap-error':
        throw permanent(new Error('mailbox gone'));
      case 'wrap-string':
        throw permanent('no such user');
      case 'second-attempt':
        if (ctx.attempt === 1) throw new Error('transient');
        throw new PermanentError('now it is final');
    }
  }

  @Step('throws_non_error', { maxAttempts: 1 })
  async throwsNonError(input: { value: 'string' | 'object' | 'undefined' | 'number' }): Promise<never> {
    const thrown = { string: 'boom', object: { code: 42, reason: 'quota' }, undefined: undefined, number: 7 }[input.value];
    throw thrown;
  }

  @Step('throws_sync', { maxAttempts: 1 })
  throwsSync(): never {
    throw new TypeError('thrown before any await');
  }

  @Step('bad_output', { maxAttempts: 1 })
  async badOutput(input: { what: 'bigint' | 'function' | 'cyclic' | 'huge' }): Promise<unknown> {
    switch (input.what) {
      case 'bigint':
        return { total: 10n };
      case 'function':
        return { callback: () => 1 };
      case 'cyclic':
        return cyclic();
      case 'huge':
        return 'x'.repeat(MAX_PAYLOAD_BYTES * 2);
    }
  }

  @Step('good')
  async good(input: { n: number }) {
    return { n: input.n + 1 };
  }
}

describe('retries, backoff and failures', () => {
  let env: CycloneTestEnv;
  beforeAll(async () => {
    // One worker: the failing jobs and the good ones share it.
    env = await CycloneTestEnv.create({ providers: [Steps], workers: 1, maxPayloadBytes: MAX_PAYLOAD_BYTES });
  });
  afterAll(async () => env?.close());
  beforeEach(() => {
    calls.length = 0;
    backoffArgs.length = 0;
  });

  const stepOf = async (runId: string) => (await env.client.listSteps(runId))[0];
  /** Waits for the run to fail and returns the error `result` throws. */
  const failure = (runId: string) => expectCycloneError(env.client.result(runId, { timeout: 10_000 }), RunFailedError, 'run_failed');

  describe('maxAttempts and backoff', () => {
    it('a handler that always throws is attempted exactly maxAttempts times (the step default), then discarded', async () => {
      const runId = await env.client.enqueue('always_fails', {});
      const err = await failure(runId);
      expect(err.failedSteps).toEqual([{ nodeId: 'always_fails', error: 'attempt 4 failed', errorKind: 'error' }]);
      expect(attemptsOf('always_fails')).toEqual([1, 2, 3, 4]);
      expect(await stepOf(runId)).toMatchObject({ state: 'discarded', attempt: 4, maxAttempts: 4, reclaims: 0 });
      expect((await env.client.getRun(runId)).state).toBe('failed');
    });

    it('the step\'s backoff delays the next attempt, and the failed attempt\'s error is kept meanwhile', async () => {
      const runId = await env.client.enqueue('slow_retry', {});
      const waiting = await waitFor('the first attempt to fail',async () => {
        const step = await stepOf(runId);
        return step.state === 'available' && step.attempt === 2 ? step : undefined;
      },10_000);
      expect(waiting).toMatchObject({ error: 'first attempt fails', errorKind: 'error', maxAttempts: 2 });
      // Asked only about the attempt that can fail and be retried (it is asked when the job is written, and
      // the worker asks again for jobs written before steps stored their backoff).
      expect(new Set(backoffArgs)).toEqual(new Set([1]));

      await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ attempt: 2 });
      const [first, second] = calls.filter((c) => c.kind === 'slow_retry');
      expect([first.attempt, second.attempt]).toEqual([1, 2]);
      expect(second.at - first.at).toBeGreaterThanOrEqual(1_200);
      expect(second.at - first.at).toBeLessThan(8_000);

      // On the database clock: not started before the scheduled retry time.
      const done = await stepOf(runId);
      expect(done).toMatchObject({ state: 'completed', attempt: 2, error: null, errorKind: null });
      expect(done.startedAt!.getTime()).toBeGreaterThanOrEqual(waiting.scheduledAt.getTime());
    });

    it('a backoff may return a duration string', async () => {
      const runId = await env.client.enqueue('string_backoff', {});
      await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toBe('third time lucky');
      expect(attemptsOf('string_backoff')).toEqual([1, 2, 3]);
    });

    it('a backoff that throws or returns no valid duration still lets the step retry (with the default backoff)', async () => {
      const invalid = await env.client.enqueue('invalid_backoff', {});
      const throwing = await env.client.enqueue('throwing_backoff', {});
      await expect(env.client.result(invalid, { timeout: 10_000 })).resolves.toBe('recovered');
      await expect(env.client.result(throwing, { timeout: 10_000 })).resolves.toBe('recovered');
      expect(attemptsOf('invalid_backoff')).toEqual([1, 2]);
      expect(attemptsOf('throwing_backoff')).toEqual([1, 2]);
    });
  });

  describe('permanent errors', () => {
    it.each([
      ['class', 'bad address'],
      ['wrap-error', 'mailbox gone'],
      ['wrap-string', 'no such user'],
    ] as const)('PermanentError (%s) discards the step after one attempt with errorKind "permanent"', async (how, message) => {
      const runId = await env.client.enqueue('permanent', { how });
      const err = await failure(runId);
      expect(err.failedSteps).toEqual([{ nodeId: 'permanent', error: message, errorKind: 'permanent' }]);
      expect(await stepOf(runId)).toMatchObject({ state: 'discarded', attempt: 1, maxAttempts: 5, error: message, errorKind: 'permanent' });
      expect(attemptsOf('permanent')).toEqual([1]);
    });

    it('a PermanentError on a later attempt makes that attempt the last', async () => {
      const runId = await env.client.enqueue('permanent', { how: 'second-attempt' });
      const err = await failure(runId);
      expect(err.failedSteps).toEqual([{ nodeId: 'permanent', error: 'now it is final', errorKind: 'permanent' }]);
      expect(attemptsOf('permanent')).toEqual([1, 2]);
      expect(await stepOf(runId)).toMatchObject({ state: 'discarded', attempt: 2, maxAttempts: 5 });
    });
  });

  describe('misbehaving handlers are contained', () => {
    it('a thrown non-Error fails the step with a message that shows the value; the worker goes on', async () => {
      const cases = [
        ['string', 'boom'],
        ['object', '{"code":42,"reason":"quota"}'],
        ['number', '7'],
        ['undefined', 'undefined'],
      ] as const;
      const failing = await Promise.all(cases.map(([value]) => env.client.enqueue('throws_non_error', { value })));
      const sync = await env.client.enqueue('throws_sync', {});
      const good = await env.client.enqueue('good', { n: 1 });

      for (const [i, [, shown]] of cases.entries()) {
        const err = await failure(failing[i]);
        expect(err.failedSteps).toHaveLength(1);
        expect(err.failedSteps[0].errorKind).toBe('error');
        expect(err.failedSteps[0].error).toContain(shown);
        expect(err.failedSteps[0].error).toMatch(/non-error/i);
      }
      expect((await failure(sync)).failedSteps[0].error).toBe('thrown before any await');
      await expect(env.client.result(good, { timeout: 10_000 })).resolves.toEqual({ n: 2 });
    });

    it('a returned value that is not JSON-serialisable or too large fails the step; the worker goes on', async () => {
      const cases = [
        ['bigint', /bigint/],
        ['function', /function/],
        ['cyclic', /refers back to itself/],
        ['huge', /over the limit of 4096 bytes/],
      ] as const;
      const failing = await Promise.all(cases.map(([what]) => env.client.enqueue('bad_output', { what })));
      const good = await env.client.enqueue('good', { n: 41 });

      for (const [i, [, pattern]] of cases.entries()) {
        const err = await failure(failing[i]);
        expect(err.failedSteps[0].errorKind).toBe('error');
        expect(err.failedSteps[0].error).toMatch(pattern);
        expect(err.failedSteps[0].error).toMatch(/output/);
        const step = await stepOf(failing[i]);
        expect(step).toMatchObject({ state: 'discarded', output: null, attempt: 1 });
      }
      await expect(env.client.result(good, { timeout: 10_000 })).resolves.toEqual({ n: 42 });
      // And the worker still takes new work afterwards.
      const after = await env.client.enqueue('good', { n: 99 });
      await expect(env.client.result(after, { timeout: 10_000 })).resolves.toEqual({ n: 100 });
    });
  });
});
