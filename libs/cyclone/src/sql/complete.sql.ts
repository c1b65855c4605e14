import { statement } from '../database/statement.js';

/**
 * Completes a batch of one worker's steps; returns the id and lease
 * generation of each step it completed (sql/functions/complete-steps.sql).
 * Arrays in the same order.
 */
export const COMPLETE_STEPS = statement<
  [runIds: string[], ids: string[], owner: string, generations: string[], outputs: string[]],
  { id: string; generation: string }
>(
  'cyclone_complete_steps',
  /* sql */ `SELECT id, generation FROM cyclone_complete_steps($1::uuid[], $2::bigint[], $3, $4::bigint[], $5::jsonb[])`,
  { prepared: true },
);

/**
 * A failed attempt: retried after the delay, or discarded, and recorded
 * with the stack of what the handler threw (sql/functions/fail-step.sql).
 */
export const FAIL_STEP = statement<
  [
    runId: string,
    id: string,
    owner: string,
    generation: string,
    error: string,
    errorKind: string,
    retryDelayMs: number,
    stack: string | null,
  ],
  { state: string | null }
>('cyclone_fail_step', /* sql */ `SELECT cyclone_fail_step($1, $2, $3, $4, $5, $6, $7, $8) AS state`);

/**
 * FAIL_STEP without the stack, as schema version 10 takes it: for a client
 * that starts before its database is migrated to version 11 (migrationsRun
 * false, \`cyclone migrate\` after the deploy), so that its failures are
 * still recorded, not left to run again once their lease expires.
 */
export const FAIL_STEP_WITHOUT_STACK = statement<
  [runId: string, id: string, owner: string, generation: string, error: string, errorKind: string, retryDelayMs: number],
  { state: string | null }
>('cyclone_fail_step_without_stack', /* sql */ `SELECT cyclone_fail_step($1, $2, $3, $4, $5, $6, $7) AS state`);

/** A snoozed step, available again after the delay (sql/functions/snooze-step.sql). */
export const SNOOZE_STEP = statement<
  [runId: string, id: string, owner: string, generation: string, delayMs: number],
  { ok: boolean }
>(
  'cyclone_snooze_step',
  /* sql */ `SELECT cyclone_snooze_step($1, $2, $3, $4, $5) AS ok`,
);
