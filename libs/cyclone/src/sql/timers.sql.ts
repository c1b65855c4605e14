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
