import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { PermanentError, RunFailedError, Step, type StepContext } from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { expectCycloneError, untilDatabaseTime } from './support/e2e-helpers.js';
import { sql } from './support/sql.js';

/**
 * A failure must be recorded whatever the handler threw or returned: if the
 * write that records it fails, the step stays running until its lease
 * expires and is run again without consuming an attempt, forever (an outside
 * probe saw a maxAttempts: 1 job run 3 times in 28 s). Each case here throws
 * or returns something whose text or JSON cannot be made or stored as it is;
 * each must fail the step once, with a readable error, consuming its attempt.
 */

const LEASE_TTL_MS = 300;
/** How often each case's handler was called, by case. */
const calls = new Map<string, number>();

function nested(depth: number): unknown {
  let value: unknown = 'deep';
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

const everyTrapThrows = new Proxy(
  {},
  new Proxy(
    {},
    {
      get: () => () => {
        throw new Error('trap');
      },
    },
  ),
);

/** What the handler throws (`throw`) or returns (`return`), by case. */
const CASES: Record<string, { throw?: () => unknown; return?: () => unknown }> = {
  'an Error whose message getter throws': {
    throw: () =>
      Object.defineProperty(new Error(), 'message', {
        get() {
          throw new Error('no message for you');
        },
      }),
  },
  'an object whose toJSON throws': { throw: () => ({ toJSON: () => { throw new Error('no JSON'); } }) },
  'an Error with a NUL in its message': { throw: () => new Error('bad\u0000byte') },
  'an Error with half of an emoji in its message': { throw: () => new Error(`cut ${'😀'.slice(0, 1)} here`) },
  'an Error with a 1 MB message': { throw: () => new Error('x'.repeat(1024 * 1024)) },
  'a PermanentError with a NUL in its message': { throw: () => new PermanentError('nul\u0000permanent') },
  'a value without a prototype': { throw: () => Object.assign(Object.create(null), { why: 'bare' }) },
  'a proxy whose every trap throws': { throw: () => everyTrapThrows },
  'a bigint': { throw: () => 10n },
  'an output whose toJSON throws': { return: () => ({ toJSON: () => { throw new Error('no JSON'); } }) },
  'an output whose toJSON returns a bigint': { return: () => ({ toJSON: () => 1n }) },
  'an output whose toJSON returns a NUL': { return: () => ({ toJSON: () => 'a\u0000b' }) },
  'an output with a getter that throws': {
    return: () => ({
      get total(): number {
        throw new Error('getter');
      },
    }),
  },
  'an output nested 5,000 levels deep': { return: () => nested(5_000) },
  'an output whose toJSON returns itself nested': { return: () => ({ toJSON: () => ({ inner: { n: 1n } }) }) },
  'an error text the database refuses': { throw: () => new Error('refuse-me') },
};

@Injectable()
class UnrecordableSteps {
  @Step('unrecordable', { maxAttempts: 1 })
  async run(input: { name: string }, ctx: StepContext): Promise<unknown> {
    calls.set(input.name, (calls.get(input.name) ?? 0) + 1);
    void ctx;
    const behaviour = CASES[input.name];
    if (behaviour.throw) throw behaviour.throw();
    return behaviour.return!();
  }
}

describe('a handler failure that cannot be recorded as it is', () => {
  let env: CycloneTestEnv;
  beforeAll(async () => {
    env = await CycloneTestEnv.create({
      providers: [UnrecordableSteps],
      workers: 4,
      leaseTtl: LEASE_TTL_MS,
      pollInterval: [30, 60],
      logger: false,
    });
    // The database refuses one error text itself, as a constraint of the app's could: whatever
    // Cyclone makes of an error, the failure must still be recorded.
    await sql(
      env,
      `CREATE FUNCTION refuse_error() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF NEW.error LIKE '%refuse-me%' THEN RAISE EXCEPTION 'error text refused' USING ERRCODE = '22023'; END IF;
         RETURN NEW;
       END $$;
       CREATE TRIGGER refuse_error BEFORE UPDATE ON cyclone_steps FOR EACH ROW EXECUTE FUNCTION refuse_error()`,
    );
  });
  afterAll(async () => env?.close());

  /** Every case at once, then several lease TTLs: a failure that was not recorded would have been reclaimed and run again. */
  const runs = new Map<string, string>();
  beforeAll(async () => {
    for (const name of Object.keys(CASES)) runs.set(name, await env.client.enqueue('unrecordable', { name }));
    await Promise.all([...runs.values()].map((runId) => env.runUntilComplete(runId, { timeout: 10_000 })));
    // Past every lease of theirs (on the database clock), the sweep and the workers look again.
    const [{ now }] = await sql(env, 'SELECT clock_timestamp() AS now');
    await untilDatabaseTime(env, new Date(now.getTime() + LEASE_TTL_MS));
    await env.waitForPasses('cyclone:recovery', 2);
    await env.waitForPasses('cyclone:claim', 2);
  });

  it.each(Object.keys(CASES))('%s: the step fails once, readably, consuming its one attempt', async (name) => {
    const runId = runs.get(name)!;
    const err = await expectCycloneError(env.client.result(runId, { timeout: 1_000 }), RunFailedError, 'run_failed');
    const [step] = await env.client.listSteps(runId);
    expect(step).toMatchObject({ state: 'discarded', attempt: 1, reclaims: 0 });
    expect(step.errorKind).toBe(name.startsWith('a PermanentError') ? 'permanent' : 'error');
    expect(typeof step.error).toBe('string');
    expect(step.error!.length).toBeGreaterThan(0);
    expect(step.error!.length).toBeLessThan(11_000);
    expect(err.failedSteps[0].error).toBe(step.error);
    // Several lease TTLs after it failed it has still run once: no reclaim ran it again.
    expect(calls.get(name)).toBe(1);
  });

  it('stores what it can of the text: NUL shown as \\u0000, half characters as U+FFFD, long text cut', async () => {
    const errorOf = async (name: string) => (await env.client.listSteps(runs.get(name)!))[0].error!;
    expect(await errorOf('an Error with a NUL in its message')).toBe('bad\\u0000byte');
    expect(await errorOf('an Error with half of an emoji in its message')).toBe('cut \uFFFD here');
    expect(await errorOf('an Error whose message getter throws')).toContain('message cannot be read');
    expect(await errorOf('an object whose toJSON throws')).toContain('Non-Error thrown');
    expect(await errorOf('an output whose toJSON throws')).toContain('no JSON');
    expect(await errorOf('an output nested 5,000 levels deep')).toContain('levels deep');
    expect(await errorOf('an error text the database refuses')).toContain('could not be stored');
    expect(await errorOf('an Error with a 1 MB message')).toMatch(/^x{10000}… \(\d+ more characters\)$/);
  });
});
