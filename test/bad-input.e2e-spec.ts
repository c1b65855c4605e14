import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import {
  CycloneError,
  InvalidInputError,
  InvalidOptionError,
  NotInTransactionError,
  RunNotFoundError,
  Step,
  UnknownStepError,
  defineStep,
  type EnqueueOptions,
} from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { countRows, expectCycloneError, expectRejectedWritingNothing, rowsOfRun } from './support/e2e-helpers.js';
import { sql } from './support/sql.js';
import { waitFor } from './support/wait.js';

const MAX_PAYLOAD_BYTES = 1_024;

@Injectable()
class Steps {
  @Step('echo')
  async echo(input: unknown) {
    return input;
  }
}

function cyclic(): object {
  const a: Record<string, unknown> = { name: 'a' };
  a.child = { parent: a };
  return a;
}

/** Casts for values a TypeScript caller could not pass, but a JavaScript one (or `any`) can. */
const loose = (value: unknown) => value as any;

describe('bad input is rejected with a typed error and leaves nothing behind', () => {
  let env: CycloneTestEnv;
  beforeAll(async () => {
    env = await CycloneTestEnv.create({ providers: [Steps], maxPayloadBytes: MAX_PAYLOAD_BYTES });
  });
  afterAll(async () => env?.close());

  const enqueueWith = (opts: unknown) => () => env.client.enqueue('echo', {}, loose(opts));

  describe('unknown kind', () => {
    it.each([
      ['enqueue', () => env.client.enqueue('send_emial', {})],
      ['enqueueAction', () => env.client.enqueueAction('send_emial', {})],
      ['enqueueMany', () => env.client.enqueueMany('send_emial', [{}, {}])],
      ['enqueue of a StepRef nobody registered', () => env.client.enqueue(defineStep('send_emial'), {})],
    ])('%s throws UnknownStepError naming the kind and the fix', async (_name, call) => {
      const err = await expectRejectedWritingNothing(env, call, UnknownStepError, 'unknown_step');
      expect(err.kind).toBe('send_emial');
      expect(err.message).toContain("@Step('send_emial')");
    });
  });

  describe('input', () => {
    it.each([
      ['a function', () => 1, /function/],
      ['a nested function', { callback: () => 1 }, /\$\.callback is a function/],
      ['a bigint', 10n, /bigint/],
      ['a nested bigint', { amounts: [1, 2n] }, /\$\.amounts\.1 is a bigint/],
      ['a cyclic object', cyclic(), /refers back to itself/],
      ['a symbol', { tag: Symbol('x') }, /symbol/],
      ['NaN', { score: NaN }, /NaN/],
      ['Infinity', { score: Infinity }, /Infinity/],
      ['a Map (JSON would turn it into {})', { tags: new Map([['a', 1]]) }, /\$\.tags is a Map/],
      ['a Set (JSON would turn it into {})', new Set([1, 2]), /\$ is a Set/],
    ])('that is %s throws InvalidInputError saying where', async (_name, input, reason) => {
      const err = await expectRejectedWritingNothing(
        env,
        () => env.client.enqueue('echo', loose(input)),
        InvalidInputError,
        'invalid_input',
      );
      expect(err.message).toMatch(reason);
      expect(err.message).toMatch(/JSON-serialisable/);
    });

    it('over maxPayloadBytes (counted in bytes of JSON, not characters) throws InvalidInputError', async () => {
      const big = await expectRejectedWritingNothing(
        env,
        () => env.client.enqueue('echo', 'x'.repeat(2_000)),
        InvalidInputError,
        'invalid_input',
      );
      expect(big.message).toContain('maxPayloadBytes');
      expect(big.message).toContain(`${MAX_PAYLOAD_BYTES} bytes`);
      // 600 characters, 1,200 bytes of UTF-8.
      await expectRejectedWritingNothing(env, () => env.client.enqueue('echo', 'é'.repeat(600)), InvalidInputError, 'invalid_input');
    });

    it('enqueueMany rejects the whole batch when one input is bad, naming its index', async () => {
      const bad = await expectRejectedWritingNothing(
        env,
        () => env.client.enqueueMany('echo', [{ n: 1 }, { n: 2 }, { n: 3n }]),
        InvalidInputError,
        'invalid_input',
      );
      expect(bad.message).toContain('index 2');
      await expectRejectedWritingNothing(
        env,
        () => env.client.enqueueMany('echo', [{ n: 1 }, 'x'.repeat(2_000)]),
        InvalidInputError,
        'invalid_input',
      );
      await expectRejectedWritingNothing(env, () => env.client.enqueueMany('echo', loose({ n: 1 })), InvalidOptionError, 'invalid_option');
      await expectRejectedWritingNothing(
        env,
        () => env.client.enqueueMany('echo', [{ n: 1 }], { unique: 'k' }),
        InvalidOptionError,
        'invalid_option',
      );
    });
  });

  describe('durations', () => {
    const options = ['timeout', 'processIn', 'retention'] as const;
    // The last two are over 100 years: more than the database's interval and timestamp types hold.
    const values: unknown[] = ['abc', -5, '5 parsecs', '-5s', '', NaN, Infinity, true, 1e20, '1000000d'];
    it.each(options.flatMap((option) => values.map((value) => [option, value] as const)))(
      '%s = %p throws InvalidOptionError naming the option',
      async (option, value) => {
        const err = await expectRejectedWritingNothing(env, enqueueWith({ [option]: value }), InvalidOptionError, 'invalid_option');
        expect(err.message).toContain(`"${option}"`);
      },
    );

    it('a zero timeout is refused: leave it unset for no limit', async () => {
      for (const timeout of [0, '0s']) {
        const err = await expectRejectedWritingNothing(env, enqueueWith({ timeout }), InvalidOptionError, 'invalid_option');
        expect(err.message).toContain('greater than zero');
      }
    });

    it('result with an unparsable timeout throws InvalidOptionError', async () => {
      await expectRejectedWritingNothing(
        env,
        () => env.client.result('00000000-0000-4000-8000-000000000000', { timeout: 'soon' }),
        InvalidOptionError,
        'invalid_option',
      );
    });
  });

  describe('numbers out of range', () => {
    it.each([
      ['priority', 1_001],
      ['priority', -1_001],
      ['priority', 1.5],
      ['priority', '5'],
      ['priority', NaN],
      ['maxAttempts', 0],
      ['maxAttempts', -1],
      ['maxAttempts', 2.5],
      ['maxReclaims', -1],
      ['maxReclaims', 0.5],
    ])('%s = %p throws InvalidOptionError naming the option and its range', async (option, value) => {
      const err = await expectRejectedWritingNothing(env, enqueueWith({ [option]: value }), InvalidOptionError, 'invalid_option');
      expect(err.message).toContain(`"${option}"`);
      expect(err.message).toMatch(/integer from -?\d+ to \d+/);
    });
  });

  describe('other options', () => {
    it('an unknown option name throws InvalidOptionError listing the known ones', async () => {
      const err = await expectRejectedWritingNothing(env, enqueueWith({ priorty: 5 }), InvalidOptionError, 'invalid_option');
      expect(err.message).toContain('"priorty"');
      expect(err.message).toContain('priority');
      await expectRejectedWritingNothing(env, enqueueWith({ delay: '5s' }), InvalidOptionError, 'invalid_option');
    });

    it('processAt and processIn together throw InvalidOptionError', async () => {
      const err = await expectRejectedWritingNothing(
        env,
        enqueueWith({ processAt: new Date(Date.now() + 60_000), processIn: '1m' } satisfies EnqueueOptions),
        InvalidOptionError,
        'invalid_option',
      );
      expect(err.message).toContain('processAt');
      expect(err.message).toContain('processIn');
    });

    it.each([new Date('not a date'), '2030-01-01T00:00:00Z', Date.now() + 60_000])(
      'processAt = %p (not a valid Date) throws InvalidOptionError',
      async (processAt) => {
        await expectRejectedWritingNothing(env, enqueueWith({ processAt }), InvalidOptionError, 'invalid_option');
      },
    );

    it.each([
      ['queue', 'empty', ''],
      ['queue', 'not a string', 42],
      ['unique', 'empty', ''],
      ['unique', 'over 200 characters', 'k'.repeat(201)],
    ])('%s (%s) throws InvalidOptionError', async (option, _what, value) => {
      await expectRejectedWritingNothing(env, enqueueWith({ [option]: value }), InvalidOptionError, 'invalid_option');
    });

    it('options that are not an object throw InvalidOptionError', async () => {
      await expectRejectedWritingNothing(env, enqueueWith('fast'), InvalidOptionError, 'invalid_option');
    });
  });

  describe('unknown run id', () => {
    /** A well-formed id that was never enqueued, and two that cannot be run ids at all. */
    const ids = ['00000000-0000-4000-8000-000000000000', 'not-a-uuid', ''];
    const calls = {
      getRun: (id: string) => env.client.getRun(id),
      listSteps: (id: string) => env.client.listSteps(id),
      cancel: (id: string) => env.client.cancel(id),
      result: (id: string) => env.client.result(id, { timeout: 1_000 }),
      output: (id: string) => env.client.output(id, 'echo'),
      retry: (id: string) => env.client.retry(id, 'echo'),
      retryAll: (id: string) => env.client.retryAll(id),
    };
    it.each(Object.keys(calls).flatMap((name) => ids.map((id) => [name, id] as const)))(
      '%s(%p) throws RunNotFoundError carrying the id',
      async (name, id) => {
        const err = await expectRejectedWritingNothing(env, () => calls[name as keyof typeof calls](id), RunNotFoundError, 'run_not_found');
        expect(err.runId).toBe(id);
        expect(err.message).toContain('does not exist');
      },
    );
  });

  describe('what an outside probe found (each refused before the database sees it)', () => {
    const bad: [string, string][] = [
      ['a NUL', 'key\u0000'],
      ['a lone high surrogate', 'key\ud800'],
      ['a lone low surrogate', 'key\udc00'],
    ];
    const RUN = '00000000-0000-7000-8000-000000000000';
    const positions: [string, string, (name: string) => Promise<unknown>][] = [
      ['unique', 'unique', (name) => env.client.enqueue('echo', {}, { unique: name })],
      ['queue', 'queue', (name) => env.client.enqueue('echo', {}, { queue: name })],
      ['pauseQueue', 'queue', (name) => env.client.pauseQueue(name)],
      ['resumeQueue', 'queue', (name) => env.client.resumeQueue(name)],
      ['output node id', 'nodeId', (name) => env.client.output(RUN, name)],
      ['retry node id', 'nodeId', (name) => env.client.retry(RUN, name)],
      ['signal name', 'signal', (name) => env.client.signal(RUN, name)],
    ];
    it.each(positions.flatMap(([where, option, call]) => bad.map(([what, name]) => [where, what, option, call, name] as const)))(
      'a name (%s) with %s throws InvalidOptionError naming the option',
      async (_where, _what, option, call, name) => {
        const err = await expectRejectedWritingNothing(env, () => call(name), InvalidOptionError, 'invalid_option');
        expect(err.message).toContain(`"${option}"`);
        expect(err.message).toContain('PostgreSQL cannot store');
      },
    );

    it("inside enqueueTx, a bad name is refused without aborting the caller's transaction", async () => {
      const rows = await env.dataSource.transaction(async (manager) => {
        await manager.query('CREATE TEMP TABLE signups (email text) ON COMMIT DROP');
        await manager.query(`INSERT INTO signups VALUES ('ada@example.com')`);
        await expectCycloneError(env.client.enqueueTx(manager, 'echo', {}, { unique: 'signup:\u0000' }), InvalidOptionError, 'invalid_option');
        // The transaction goes on: its next statement runs, and it commits.
        return manager.query('SELECT email FROM signups');
      });
      expect(rows).toEqual([{ email: 'ada@example.com' }]);
      expect(await countRows(env)).toEqual({ runs: 0, steps: 0 });
    });

    it('an input nested 5,000 levels deep (10 KB of JSON) throws InvalidInputError, not a stack overflow', async () => {
      const deep = JSON.parse('['.repeat(5_000) + ']'.repeat(5_000));
      const err = await expectRejectedWritingNothing(env, () => env.client.enqueue('echo', deep), InvalidInputError, 'invalid_input');
      expect(err.message).toContain('levels deep');
    });

    it.each([
      ['a bigint', { toJSON: () => 1n }, /is a bigint/],
      ['a NUL', { wrapped: { toJSON: () => 'a\u0000b' } }, /\$\.wrapped contains a NUL/],
      ['a throw', { toJSON: () => { throw new Error('no'); } }, /toJSON\(\) threw: no/],
    ])('a toJSON that returns (or does) %s is checked like any value', async (_what, input, reason) => {
      const err = await expectRejectedWritingNothing(env, () => env.client.enqueue('echo', loose(input)), InvalidInputError, 'invalid_input');
      expect(err.message).toMatch(reason);
    });

    it('a value without a prototype is described in the error instead of crashing its message', async () => {
      const bare = Object.create(null);
      const priority = await expectRejectedWritingNothing(env, enqueueWith({ priority: bare }), InvalidOptionError, 'invalid_option');
      expect(priority.message).toContain('got an object without a prototype');
      const run = await expectRejectedWritingNothing(env, () => env.client.getRun(bare), RunNotFoundError, 'run_not_found');
      expect(run.message).toContain('an object without a prototype');
      await expectRejectedWritingNothing(env, () => env.client.enqueue(bare, {}), UnknownStepError, 'unknown_step');
    });

    it('null or a wrong type where an options object or a transaction is expected throws a typed error', async () => {
      const cases: [() => Promise<unknown>, abstract new (...args: any[]) => CycloneError, string][] = [
        [() => env.client.result(RUN, loose(null)), InvalidOptionError, 'invalid_option'],
        [() => env.client.enqueueMany('echo', [{}], loose(null)), InvalidOptionError, 'invalid_option'],
        [() => env.client.enqueue('echo', {}, loose(null)), InvalidOptionError, 'invalid_option'],
        [() => env.client.enqueue('echo', {}, loose([])), InvalidOptionError, 'invalid_option'],
        [() => env.client.enqueueTx(loose(null), 'echo', {}), NotInTransactionError, 'not_in_transaction'],
        [() => env.client.enqueueTx(loose('manager'), 'echo', {}), NotInTransactionError, 'not_in_transaction'],
      ];
      for (const [call, type, code] of cases) await expectRejectedWritingNothing(env, call, type, code);
    });

    it('a processAt the database cannot hold (before 4714 BC) throws InvalidOptionError; the earliest it holds is accepted', async () => {
      const err = await expectRejectedWritingNothing(env, enqueueWith({ processAt: new Date(-8.64e15) }), InvalidOptionError, 'invalid_option');
      expect(err.message).toContain('PostgreSQL can hold');
      const earliest = await env.client.enqueue('echo', 'long ago', { processAt: new Date(Date.UTC(-4713, 10, 24)) });
      await expect(env.client.result(earliest, { timeout: 10_000 })).resolves.toBe('long ago');
      await sql(env, 'DELETE FROM cyclone_steps; DELETE FROM cyclone_runs');
    });
  });

  describe('limits that are accepted', () => {
    it('input of exactly maxPayloadBytes, priority ±1000 and a zero duration are accepted', async () => {
      const atLimit = { s: 'x'.repeat(MAX_PAYLOAD_BYTES - '{"s":""}'.length) };
      expect(Buffer.byteLength(JSON.stringify(atLimit))).toBe(MAX_PAYLOAD_BYTES);
      const ids = [
        await env.client.enqueue('echo', atLimit),
        await env.client.enqueue('echo', 1, { priority: 1_000, timeout: '1s' }),
      ];
      // A retention of zero keeps no history: the run is deleted as it completes.
      const zero = await env.client.enqueue('echo', 2, { priority: -1_000, processIn: 0, retention: '0ms' });
      await expect(env.client.result(ids[0], { timeout: 10_000 })).resolves.toEqual(atLimit);
      await expect(env.client.result(ids[1], { timeout: 10_000 })).resolves.toBe(1);
      await waitFor('the run kept for no time to complete', async () => (await rowsOfRun(env, zero)).runs === 0);
      expect(await countRows(env)).toEqual({ runs: 2, steps: 2 });
    });
  });
});
