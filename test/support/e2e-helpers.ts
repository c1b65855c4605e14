import { expect } from '@jest/globals';
import type { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { CycloneError } from 'cyclone-nestjs';
import { sql } from './sql.js';
import { waitFor } from './wait.js';

/** How many runs and steps the environment's database holds. */
export async function countRows(env: CycloneTestEnv): Promise<{ runs: number; steps: number }> {
  const [row] = await sql(
    env,
    'SELECT (SELECT count(*)::int FROM cyclone_runs) AS runs, (SELECT count(*)::int FROM cyclone_steps) AS steps',
  );
  return { runs: row.runs, steps: row.steps };
}

/** Rows of one run: the run itself and its steps, read straight from the tables. */
export async function rowsOfRun(env: CycloneTestEnv, runId: string): Promise<{ runs: number; steps: number }> {
  const [row] = await sql(
    env,
    `SELECT (SELECT count(*)::int FROM cyclone_runs WHERE id = $1) AS runs,
            (SELECT count(*)::int FROM cyclone_steps WHERE run_id = $1) AS steps`,
    [runId],
  );
  return { runs: row.runs, steps: row.steps };
}

/** Awaits `promise`, expects it to reject with a CycloneError of `type` and `code`, and returns the error. */
export async function expectCycloneError<E extends CycloneError>(
  promise: Promise<unknown> | (() => Promise<unknown>),
  type: abstract new (...args: any[]) => E,
  code: string,
): Promise<E> {
  let caught: unknown;
  try {
    await (typeof promise === 'function' ? promise() : promise);
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(type);
  expect(caught).toBeInstanceOf(CycloneError);
  expect((caught as CycloneError).code).toBe(code);
  return caught as E;
}

/**
 * Expects the call to fail with a CycloneError of `type` and `code`, and the
 * environment's tables, empty before it, to be empty still: bad input writes nothing.
 */
export async function expectRejectedWritingNothing<E extends CycloneError>(
  env: CycloneTestEnv,
  call: () => Promise<unknown>,
  type: abstract new (...args: any[]) => E,
  code: string,
): Promise<E> {
  const err = await expectCycloneError(call, type, code);
  expect(await countRows(env)).toEqual({ runs: 0, steps: 0 });
  return err;
}

/** A promise with its resolve function outside, to hold a handler until the test lets it go. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * Waits until the database clock, which every due time and deadline of
 * Cyclone's is read on, has passed `at`: for a wait that is about time
 * itself (a delay or a backoff coming due), with a deadline rather than a
 * guessed sleep.
 */
export async function untilDatabaseTime(env: CycloneTestEnv, at: Date, timeoutMs = 10_000): Promise<void> {
  await waitFor(
    `the database clock to pass ${at.toISOString()}`,
    async () => (await sql<{ past: boolean }>(env, 'SELECT clock_timestamp() > $1 AS past', [at]))[0].past,
    timeoutMs,
  );
}

/** Waits until every running step is the recovery sweep's: its lease, or its timeout, has run out on the database clock. */
export async function untilRunningStepsLapse(env: CycloneTestEnv): Promise<void> {
  const [{ at }] = await sql<{ at: Date | null }>(
    env,
    `SELECT max(least(lease_expiry, started_at + timeout)) AS at FROM cyclone_steps WHERE state = 'running'`,
  );
  if (at) await untilDatabaseTime(env, at);
}
