/**
 * The available steps (due now or later) as a subquery of `queue` and
 * `scheduled_at`. Steps of kinds with and without limits are indexed apart
 * (cyclone_steps_flow, cyclone_steps_claim), and a condition on the state
 * alone matches neither partial index: each half is read through its own,
 * so what counts the backlog costs the backlog, never the history.
 */
export const AVAILABLE_STEPS = /* sql */ `(
  SELECT queue, scheduled_at FROM cyclone_steps WHERE state = 'available' AND flow_key IS NULL
  UNION ALL
  SELECT queue, scheduled_at FROM cyclone_steps WHERE state = 'available' AND flow_key IS NOT NULL
)`;
