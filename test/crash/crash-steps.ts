import { Injectable } from '@nestjs/common';
import { CycloneDatabase, Step, type StepContext } from 'cyclone-nestjs';
import { sleep } from '../support/wait.js';

/**
 * The step the crash and fault tests run, in worker processes and in-process.
 * Its side effect is a row in `crash_effects`, keyed by run and fenced with
 * the lease generation; every call of the handler leaves a row in
 * `crash_invocations`, so a test can count extra invocations and check that
 * each run's effect was applied exactly once.
 */
export const CRASH_KIND = 'crash_effect';

/** The handler writes its effect after this share of its time, and returns after the rest. */
export const EFFECT_AT = 0.6;

export interface CrashInput {
  i: number;
  /** How long the handler takes; default a random 100–400 ms. */
  ms?: number;
  /** The first attempt throws (before any effect), so the retry path runs. */
  failFirst?: boolean;
}

export interface CrashOutput {
  /** The fencing token this invocation wrote its effect with. */
  token: number;
  pid: number;
  /** False when the fence refused the write: a later holder had already written. */
  applied: boolean;
}

export const CREATE_CRASH_TABLES = /* sql */ `
CREATE TABLE IF NOT EXISTS crash_effects (
  run_id        uuid PRIMARY KEY,
  fencing_token bigint NOT NULL,
  pid           int NOT NULL,
  applied_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS crash_invocations (
  id            bigserial PRIMARY KEY,
  run_id        uuid NOT NULL,
  attempt       int NOT NULL,
  reclaims      int NOT NULL,
  fencing_token bigint NOT NULL,
  pid           int NOT NULL,
  started_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- 'applied' or 'fenced' once the handler wrote its effect; NULL if it never got that far.
  effect        text
);
CREATE INDEX IF NOT EXISTS crash_invocations_run ON crash_invocations (run_id, fencing_token);
`;

/**
 * The idempotent, fenced effect: one row per run. A holder with a higher token
 * may overwrite a lower one (the step was reclaimed and run again); a lower
 * token never overwrites a higher one, so a stale holder that wakes up late
 * changes nothing.
 */
const APPLY_EFFECT = /* sql */ `
INSERT INTO crash_effects (run_id, fencing_token, pid) VALUES ($1, $2, $3)
ON CONFLICT (run_id) DO UPDATE
   SET fencing_token = EXCLUDED.fencing_token, pid = EXCLUDED.pid, applied_at = clock_timestamp()
 WHERE crash_effects.fencing_token < EXCLUDED.fencing_token`;

@Injectable()
export class CrashSteps {
  constructor(private readonly database: CycloneDatabase) {}

  @Step(CRASH_KIND)
  async apply(input: CrashInput, ctx: StepContext): Promise<CrashOutput> {
    const { rows } = await this.database.pool.query<{ id: string }>(
      `INSERT INTO crash_invocations (run_id, attempt, reclaims, fencing_token, pid)
       VALUES ($1, $2, $3, $4, $5) RETURNING id`,
      [ctx.runId, ctx.attempt, ctx.reclaims, ctx.fencingToken, process.pid],
    );
    // The effect is written part-way through, so a crash can land before it
    // or after it (the effect is there, the completion is not). Deliberately
    // deaf to ctx.signal: a holder that lost its lease still tries to write,
    // and the fence, not its manners, must stop it.
    const ms = input.ms ?? 100 + Math.floor(Math.random() * 300);
    if (input.failFirst && ctx.attempt === 1) throw new Error('the first attempt fails');
    await sleep(Math.round(ms * EFFECT_AT));
    const { rowCount } = await this.database.pool.query(APPLY_EFFECT, [ctx.runId, ctx.fencingToken, process.pid]);
    const applied = rowCount === 1;
    await this.database.pool.query('UPDATE crash_invocations SET effect = $2 WHERE id = $1', [
      rows[0].id,
      applied ? 'applied' : 'fenced',
    ]);
    await sleep(Math.round(ms * (1 - EFFECT_AT)));
    return { token: ctx.fencingToken, pid: process.pid, applied };
  }
}
