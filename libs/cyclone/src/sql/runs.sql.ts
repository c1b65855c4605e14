/** One run, for getRun. */
export const GET_RUN = /* sql */ `
SELECT id, kind, workflow, state, queue, input, unique_key, created_at, updated_at, finished_at
  FROM cyclone_runs WHERE id = $1`;

/** Every node of a run, in insertion order. */
export const LIST_STEPS = /* sql */ `
SELECT id, run_id, node_id, kind, node_type, depends_on, state, queue, priority, attempt, max_attempts, reclaims, max_reclaims,
       (extract(epoch FROM timeout) * 1000)::bigint AS timeout_ms, scheduled_at, started_at, finished_at,
       heartbeat_at, wake_at, lease_owner, lease_expiry, lease_generation, output, error, error_kind
  FROM cyclone_steps WHERE run_id = $1 ORDER BY id`;

/**
 * What result() needs in one read: the run's state, and for each node whether
 * it is a sink (no other node depends on it), its state, output and error.
 */
export const RUN_OUTCOME = /* sql */ `
SELECT r.state, r.kind, s.node_id, s.state AS step_state, s.output, s.error, s.error_kind,
       NOT EXISTS (SELECT 1 FROM cyclone_steps d WHERE d.run_id = s.run_id AND s.node_id = ANY (d.depends_on)) AS sink
  FROM cyclone_runs r JOIN cyclone_steps s ON s.run_id = r.id
 WHERE r.id = $1
 ORDER BY s.id`;

/** One node's state and output. */
export const GET_OUTPUT = /* sql */ `
SELECT state, output FROM cyclone_steps WHERE run_id = $1 AND node_id = $2`;

/** See cyclone_cancel_run in the migrations. */
export const CANCEL_RUN = /* sql */ `SELECT cyclone_cancel_run($1) AS previous`;

/** See cyclone_retry_steps in the migrations. $2 NULL retries every discarded step. */
export const RETRY_STEPS = /* sql */ `SELECT cyclone_retry_steps($1, $2) AS reopened`;

/** Step state of one node, to explain a retry that reopened nothing. */
export const STEP_STATE = /* sql */ `
SELECT state FROM cyclone_steps WHERE run_id = $1 AND node_id = $2`;

/**
 * Asks for the run's finish to be announced on cyclone_run_finished; finishes
 * are announced only for runs someone waits for.
 */
export const WATCH_RUN = /* sql */ `
UPDATE cyclone_runs SET notify_finish = true WHERE id = $1 AND NOT notify_finish`;
