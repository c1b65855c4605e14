import { statement } from '../database/statement.js';
import type { RunState, StepAttemptOutcome, StepState } from './names.js';

export interface RunRow {
  id: string;
  kind: string | null;
  workflow: string | null;
  version: number | null;
  parent_id: string | null;
  state: RunState;
  queue: string;
  input: unknown;
  unique_key: string | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

export interface StepRow {
  id: string;
  run_id: string;
  node_id: string;
  kind: string | null;
  node_type: string;
  depends_on: string[];
  state: StepState;
  queue: string;
  priority: number;
  attempt: number;
  max_attempts: number;
  reclaims: number;
  max_reclaims: number | null;
  timeout_ms: string | null;
  scheduled_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  heartbeat_at: Date | null;
  wake_at: Date | null;
  lease_owner: string | null;
  lease_expiry: Date | null;
  lease_generation: string;
  input: unknown;
  output: unknown;
  progress: unknown;
  error: string | null;
  error_kind: string | null;
  created_at: Date;
  /** The step's ended attempts that the database keeps (cyclone_attempts), oldest first. */
  attempts: AttemptJson[];
}

/** A kept attempt, as LIST_STEPS reads it: times are ISO strings in JSON. */
export interface AttemptJson {
  attempt: number;
  started_at: string;
  finished_at: string;
  outcome: Exclude<StepAttemptOutcome, 'completed'>;
  error: string | null;
  error_kind: string | null;
  stack: string | null;
  worker: string | null;
}

/** One run, for getRun. */
export const GET_RUN = statement<[runId: string], RunRow>(
  'cyclone_get_run',
  /* sql */ `
SELECT id, kind, workflow, version, parent_id, state, queue, input, unique_key, created_at, updated_at, finished_at
  FROM cyclone_runs WHERE id = $1`,
);

/**
 * Every node of a run, in insertion order (a code workflow's: its own, then
 * its calls in the order they were made), with the attempts of each that
 * ended other than by completing (sql/functions/record-attempt.sql); the one
 * that completed it, or runs now, is the node's own row.
 */
export const LIST_STEPS = statement<[runId: string], StepRow>(
  'cyclone_list_steps',
  /* sql */ `
SELECT s.id, s.run_id, s.node_id, s.kind, s.node_type, s.depends_on, s.state, s.queue, s.priority, s.attempt,
       s.max_attempts, s.reclaims, s.max_reclaims, (extract(epoch FROM s.timeout) * 1000)::bigint AS timeout_ms,
       s.scheduled_at, s.started_at, s.finished_at, s.heartbeat_at, s.wake_at, s.lease_owner, s.lease_expiry,
       s.lease_generation, s.input, s.output, s.progress, s.error, s.error_kind, s.created_at,
       (SELECT coalesce(jsonb_agg(jsonb_build_object('attempt', a.attempt, 'started_at', a.started_at,
                                                     'finished_at', a.finished_at, 'outcome', a.outcome,
                                                     'error', a.error, 'error_kind', a.error_kind,
                                                     'stack', a.stack, 'worker', a.worker) ORDER BY a.seq), '[]')
          FROM cyclone_attempts a WHERE a.run_id = s.run_id AND a.step_id = s.id) AS attempts
  FROM cyclone_steps s WHERE s.run_id = $1 ORDER BY s.id`,
);

/**
 * What result() needs in one read: the run's state, and for each node whether
 * it is a sink (no other node depends on it), its state, output and error. A
 * code workflow's run is its own node's: only that node is read.
 */
export const RUN_OUTCOME = statement<
  [runId: string],
  {
    state: RunState;
    kind: string | null;
    version: number | null;
    node_id: string;
    step_state: StepState;
    output: unknown;
    error: string | null;
    error_kind: string | null;
    sink: boolean;
  }
>(
  'cyclone_run_outcome',
  /* sql */ `
SELECT r.state, r.kind, r.version, s.node_id, s.state AS step_state, s.output, s.error, s.error_kind,
       CASE WHEN r.version IS NULL
            THEN NOT EXISTS (SELECT 1 FROM cyclone_steps d WHERE d.run_id = s.run_id AND s.node_id = ANY (d.depends_on))
            ELSE true END AS sink
  FROM cyclone_runs r JOIN cyclone_steps s ON s.run_id = r.id AND (r.version IS NULL OR s.node_id = r.workflow)
 WHERE r.id = $1
 ORDER BY s.id`,
);

/** One node's state and output. */
export const GET_OUTPUT = statement<[runId: string, nodeId: string], { state: StepState; output: unknown }>(
  'cyclone_get_output',
  /* sql */ `SELECT state, output FROM cyclone_steps WHERE run_id = $1 AND node_id = $2`,
);

/** Cancels a run; returns its state before (sql/functions/cancel-run.sql). */
export const CANCEL_RUN = statement<[runId: string], { previous: RunState | null }>(
  'cyclone_cancel_run',
  /* sql */ `SELECT cyclone_cancel_run($1) AS previous`,
);

/** Reopens discarded nodes, all of them for a null node id (sql/functions/retry-steps.sql). */
export const RETRY_STEPS = statement<[runId: string, nodeId: string | null], { reopened: number }>(
  'cyclone_retry_steps',
  /* sql */ `SELECT cyclone_retry_steps($1, $2) AS reopened`,
);

/** One node's state, and whether it is due, to explain an action (retry, run now) that changed nothing. */
export const STEP_STATE = statement<
  [runId: string, nodeId: string],
  { state: StepState; paused_state: StepState | null; node_type: string; due: boolean }
>(
  'cyclone_step_state',
  /* sql */ `SELECT state, paused_state, node_type, scheduled_at <= now() AS due FROM cyclone_steps WHERE run_id = $1 AND node_id = $2`,
);

/**
 * Asks for the run's finish to be announced on cyclone_run_finished;
 * finishes are announced only for runs someone waits for.
 */
export const WATCH_RUN = statement<[runId: string]>(
  'cyclone_watch_run',
  /* sql */ `UPDATE cyclone_runs SET notify_finish = true WHERE id = $1 AND NOT notify_finish`,
);

/**
 * Makes a node that waits to run (a delay, a retry's backoff, a snooze) due
 * now, without consuming an attempt: only its due time changes. A node of a
 * paused run is due once the run resumes. Wakes the queue's workers.
 * Returns the node's queue, or no row when it was not waiting to run.
 */
export const RUN_NOW = statement<[runId: string, nodeId: string], { queue: string }>(
  'cyclone_run_now',
  /* sql */ `
WITH due AS (
  UPDATE cyclone_steps
     SET scheduled_at = now(), updated_at = now()
   WHERE run_id = $1 AND node_id = $2 AND node_type = 'step' AND scheduled_at > now()
     AND (state = 'available' OR (state = 'paused' AND paused_state = 'available'))
  RETURNING queue, state
)
SELECT queue, CASE WHEN state = 'available' THEN pg_notify('cyclone_wake', queue) END AS wake FROM due`,
);
