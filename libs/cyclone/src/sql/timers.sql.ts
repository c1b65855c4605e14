/**
 * Sleep timers and signal-wait timeouts that are due, oldest first; bounded so
 * one pass costs a fixed amount however many are due.
 *
 * $1 limit.
 */
export const DUE_TIMERS = /* sql */ `
SELECT id FROM cyclone_steps
 WHERE state IN ('waiting_timer', 'waiting_signal') AND wake_at <= now()
 ORDER BY wake_at
 LIMIT $1`;

/** See cyclone_fire_timer in the migrations. $1 step id. */
export const FIRE_TIMER = /* sql */ `SELECT cyclone_fire_timer($1) AS outcome`;

/** Moves a waiting node's wake time to now, for the test kit's fireTimer. $1 run id, $2 node id. */
export const BRING_TIMER_DUE = /* sql */ `
UPDATE cyclone_steps SET wake_at = now()
 WHERE run_id = $1 AND node_id = $2 AND state IN ('waiting_timer', 'waiting_signal') AND wake_at IS NOT NULL
RETURNING id`;
