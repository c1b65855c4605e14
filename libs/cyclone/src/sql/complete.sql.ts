/**
 * See cyclone_complete_steps in the migrations. Returns the ids it completed.
 * $1 step ids, $2 owner, $3 generations, $4 outputs (JSON texts), same order.
 */
export const COMPLETE_STEPS = /* sql */ `
SELECT id FROM cyclone_complete_steps($1::bigint[], $2, $3::bigint[], $4::jsonb[]) AS id`;

/**
 * See cyclone_fail_step in the migrations. $1 step id, $2 owner, $3 generation,
 * $4 error message, $5 error kind, $6 retry delay ms.
 */
export const FAIL_STEP = /* sql */ `SELECT cyclone_fail_step($1, $2, $3, $4, $5, $6) AS state`;

/** See cyclone_snooze_step in the migrations. $1 step id, $2 owner, $3 generation, $4 delay ms. */
export const SNOOZE_STEP = /* sql */ `SELECT cyclone_snooze_step($1, $2, $3, $4) AS ok`;
