import { statement } from '../database/statement.js';
import type { ClaimedStep } from './claim.sql.js';
import type { ErrorKind, NodeType, StepState } from './names.js';

/** Starts a run of a code workflow; NULL when the unique key is held (sql/functions/start-code-workflow.sql). */
export const START_CODE_WORKFLOW = statement<
  [
    runId: string,
    workflow: string,
    version: number,
    input: string,
    queue: string,
    priority: number,
    uniqueKey: string | null,
    retentionMs: number,
    maxAttempts: number,
    maxReclaims: number | null,
    timeoutMs: number | null,
    backoffMs: number[] | null,
    traceContext: string | null,
  ],
  { id: string | null }
>(
  'cyclone_start_code_workflow',
  /* sql */ `SELECT cyclone_start_code_workflow($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10, $11, $12::bigint[], $13::jsonb, NULL)
  AS id`,
);

/**
 * The claim of workflow nodes: the workflows this client runs, each up to
 * its version (sql/functions/claim-workflows.sql). Arrays in the same order.
 */
export const CLAIM_WORKFLOWS = statement<
  [queue: string, workflows: string[], versions: number[], limit: number, owner: string, leaseTtlMs: number],
  ClaimedStep
>(
  'cyclone_claim_workflows',
  /* sql */ `SELECT id, run_id, node_id, kind, attempt, max_attempts, reclaims, lease_generation, timeout_ms, input, upstream,
         trace_context, wait_ms
  FROM cyclone_claim_workflows($1, $2::text[], $3::integer[], $4, $5, $6)`,
  { prepared: true },
);

/** A node of a code workflow's run, as a pass reads it. */
export interface RecordedNodeRow {
  node_id: string;
  node_type: NodeType;
  kind: string | null;
  state: StepState;
  output: unknown;
  error: string | null;
  error_kind: ErrorKind | null;
  attempt: number;
  max_attempts: number;
  observed: number | null;
  /** The version the run recorded, on the workflow's own node. */
  version: number | null;
  /** On the workflow's own node: the delay its last suspension asked of its wake-up. */
  wake_delay_ms: number | null;
}

/**
 * Every node of the run, the workflow's own first; none when the pass's lease
 * is not held (sql/functions/load-history.sql).
 */
export const LOAD_HISTORY = statement<[runId: string, nodeId: string, owner: string, generation: string], RecordedNodeRow>(
  'cyclone_load_history',
  /* sql */ `SELECT node_id, node_type, kind, state, output, error, error_kind, attempt, max_attempts, observed, version,
         wake_delay_ms
  FROM cyclone_load_history($1, $2, $3, $4)`,
  { prepared: true },
);

/** A node that finished for the pass, or (node_id null, last) the status of the write. */
export interface RecordedRow {
  node_id: string | null;
  /** A node's state; the status: 'running', 'suspended' or 'lost'. */
  state: string;
  output: unknown;
  error: string | null;
  error_kind: ErrorKind | null;
  observed: number | null;
  attempt: number | null;
  max_attempts: number | null;
}

/**
 * Records a batch of a pass's durable calls, and suspends the workflow when
 * it has nothing left to do but wait (sql/functions/record-nodes.sql).
 */
export const RECORD_NODES = statement<
  [
    runId: string,
    nodeId: string,
    owner: string,
    generation: string,
    ops: string,
    nextObserved: number,
    suspend: boolean,
    awaited: string[],
    wakeDelayMs: number,
  ],
  RecordedRow
>(
  'cyclone_record_nodes',
  /* sql */ `SELECT node_id, state, output, error, error_kind, observed, attempt, max_attempts
  FROM cyclone_record_nodes($1, $2, $3, $4, $5::jsonb, $6, $7, $8::text[], $9)`,
  { prepared: true },
);

/**
 * Workflow nodes waiting, available, for a client with a newer version of
 * their workflow than the given ones: what health and the dashboard report.
 */
export const NEWER_VERSION_RUNS = statement<
  [workflows: string[], versions: number[]],
  { workflow: string; version: number; runs: number }
>(
  'cyclone_newer_version_runs',
  /* sql */ `
SELECT s.kind AS workflow, r.version, count(*)::int AS runs
  FROM cyclone_steps s
  JOIN unnest($1::text[], $2::integer[]) AS w(name, version) ON w.name = s.kind
  JOIN cyclone_runs r ON r.id = s.run_id
 WHERE s.state = 'available' AND s.node_type = 'workflow' AND r.version > w.version
 GROUP BY s.kind, r.version
 ORDER BY s.kind, r.version`,
);
