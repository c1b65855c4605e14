import { statement } from '../database/statement.js';

/**
 * Running steps the sweep should look at: lease expired (the worker died or
 * lost contact) or timeout elapsed on the database clock (the handler is
 * wedged or ignores its signal). Each is re-checked under its locks by
 * cyclone_recover_step before anything changes. A running step always holds
 * a lease (lease_expiry set), which is what the sweep's index is keyed on.
 */
export const RECOVERY_CANDIDATES = statement<
  [limit: number, leaseGraceMs: number],
  { id: string; run_id: string; node_id: string; kind: string; queue: string; attempt: number }
>(
  'cyclone_recovery_candidates',
  /* sql */ `
SELECT id, run_id, node_id, kind, queue, attempt FROM cyclone_steps
 WHERE lease_expiry IS NOT NULL AND state = 'running'
   AND (lease_expiry < now() - $2 * interval '1 millisecond' OR (timeout IS NOT NULL AND started_at + timeout <= now()))
 ORDER BY lease_expiry
 LIMIT $1`,
);

/** Settles one step if it still needs it (sql/functions/recover-step.sql). */
export const RECOVER_STEP = statement<[runId: string, id: string, retryDelayMs: number], { outcome: string | null }>(
  'cyclone_recover_step',
  /* sql */ `SELECT cyclone_recover_step($1, $2, $3) AS outcome`,
);

/** The failure the sweep recorded on a step, for the events that report it. */
export const RECOVERED_ERROR = statement<[runId: string, id: string], { error: string | null; error_kind: string | null }>(
  'cyclone_recovered_error',
  /* sql */ `SELECT error, error_kind FROM cyclone_steps WHERE run_id = $1 AND id = $2`,
);

/**
 * Wakes the workers of queues whose due steps have waited longer than the
 * given time: a NOTIFY may have been lost, or the job's delay ran out with
 * nobody to tell. Bounded so a long backlog costs a fixed amount per pass.
 * Steps of limited kinds are left out: a limit may hold them back for as
 * long as it likes, and the poll tick claims them when there is room.
 */
export const REWAKE_STALE_QUEUES = statement<[olderThanMs: number]>(
  'cyclone_rewake_stale_queues',
  /* sql */ `
SELECT queue, pg_notify('cyclone_wake', queue) AS wake
  FROM (SELECT DISTINCT queue
          FROM (SELECT queue FROM cyclone_steps
                 WHERE state = 'available' AND flow_key IS NULL AND scheduled_at <= now() - $1 * interval '1 millisecond'
                 LIMIT 1000) due) queues`,
);

/** Moves the claim's floor to the month of the oldest unfinished run (sql/functions/live-months.sql). */
export const REFRESH_CLAIM_FLOOR = statement<[]>('cyclone_refresh_claim_floor', /* sql */ `SELECT cyclone_refresh_claim_floor()`);

/** Moves a running step's lease into the past, for the test kit's expireLease. */
export const EXPIRE_LEASE = statement<[runId: string, nodeId: string], { run_id: string; id: string }>(
  'cyclone_expire_lease',
  /* sql */ `
UPDATE cyclone_steps SET lease_expiry = now() - interval '1 millisecond'
 WHERE run_id = $1 AND node_id = $2 AND state = 'running'
RETURNING run_id, id`,
);
