/** See cyclone_complete_step in the migrations. $1 step id, $2 owner, $3 generation, $4 output. */
export const COMPLETE_STEP = /* sql */ `SELECT cyclone_complete_step($1, $2, $3, $4::jsonb) AS ok`;

/**
 * See cyclone_fail_step in the migrations. $1 step id, $2 owner, $3 generation,
 * $4 error message, $5 error kind, $6 retry delay ms.
 */
export const FAIL_STEP = /* sql */ `SELECT cyclone_fail_step($1, $2, $3, $4, $5, $6) AS state`;

/**
 * A snoozed step returns to available after a delay without consuming an
 * attempt; a compare-and-set on the lease like every worker write.
 *
 * $1 step id, $2 owner, $3 generation, $4 delay ms.
 */
export const SNOOZE_STEP = /* sql */ `
UPDATE cyclone_steps
   SET state = 'available', scheduled_at = now() + $4 * interval '1 millisecond',
       lease_owner = NULL, lease_expiry = NULL, updated_at = now()
 WHERE id = $1 AND state = 'running' AND lease_owner = $2 AND lease_generation = $3`;
