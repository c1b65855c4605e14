import { statement } from '../database/statement.js';

/**
 * Sleep timers and signal-wait timeouts that are due, oldest first; bounded
 * so one pass costs a fixed amount however many are due.
 */
export const DUE_TIMERS = statement<[limit: number], { run_id: string; id: string }>(
  'cyclone_due_timers',
  /* sql */ `
SELECT run_id, id FROM cyclone_steps
 WHERE wake_at IS NOT NULL AND state IN ('waiting_timer', 'waiting_signal') AND wake_at <= now()
 ORDER BY wake_at
 LIMIT $1`,
);

/**
 * DUE_TIMERS, then one more row (run_id and id null) saying how long until
 * the next timer not yet due (null when none is set): the sweeper with
 * broker dispatch on, which sleeps until then, reads both in one statement.
 */
export const DUE_TIMERS_AND_NEXT = statement<
  [limit: number],
  { run_id: string | null; id: string | null; due_in_ms: number | null }
>(
  'cyclone_due_timers_and_next',
  /* sql */ `
(SELECT run_id, id, NULL::float8 AS due_in_ms FROM cyclone_steps
  WHERE wake_at IS NOT NULL AND state IN ('waiting_timer', 'waiting_signal') AND wake_at <= now()
  ORDER BY wake_at
  LIMIT $1)
UNION ALL
SELECT NULL, NULL, (extract(epoch FROM min(wake_at) - now()) * 1000)::float8 FROM cyclone_steps
 WHERE wake_at IS NOT NULL AND state IN ('waiting_timer', 'waiting_signal') AND wake_at > now()`,
);

/** Fires one due timer (sql/functions/fire-timer.sql). */
export const FIRE_TIMER = statement<[runId: string, id: string], { outcome: 'slept' | 'signal_timeout' | 'continued' | 'retry_due' | null }>(
  'cyclone_fire_timer',
  /* sql */ `SELECT cyclone_fire_timer($1, $2) AS outcome`,
);

/** Moves a waiting node's wake time to now, for the test kit's fireTimer. */
export const BRING_TIMER_DUE = statement<[runId: string, nodeId: string], { run_id: string; id: string }>(
  'cyclone_bring_timer_due',
  /* sql */ `
UPDATE cyclone_steps SET wake_at = now()
 WHERE run_id = $1 AND node_id = $2 AND state IN ('waiting_timer', 'waiting_signal') AND wake_at IS NOT NULL
RETURNING run_id, id`,
);
