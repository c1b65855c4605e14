import type { ErrorKind, NodeType, RunInfo, StepAttempt, StepInfo } from '../interfaces/run-info.interface.js';
import type { AttemptJson, RunRow, StepRow } from '../sql/runs.sql.js';

/** Nodes that run, each attempt on a worker: a step, a code workflow's method, its inline calls. */
const OWN_ATTEMPT: ReadonlySet<string> = new Set(['step', 'workflow', 'run']);

/** The attempts listSteps gives a step: as many as cyclone_record_attempt keeps. */
const ATTEMPTS_SHOWN = 20;

export function toRunInfo(row: RunRow): RunInfo {
  return {
    id: row.id,
    kind: row.kind,
    workflow: row.workflow,
    version: row.version,
    parentId: row.parent_id,
    state: row.state,
    queue: row.queue,
    input: row.input,
    uniqueKey: row.unique_key,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    finishedAt: row.finished_at,
  };
}

export function toStepInfo(row: StepRow): StepInfo {
  return {
    id: String(row.id),
    runId: row.run_id,
    nodeId: row.node_id,
    kind: row.kind,
    type: row.node_type as NodeType,
    after: row.depends_on,
    state: row.state,
    queue: row.queue,
    priority: row.priority,
    attempt: row.attempt,
    maxAttempts: row.max_attempts,
    reclaims: row.reclaims,
    maxReclaims: row.max_reclaims,
    timeoutMs: row.timeout_ms === null ? null : Number(row.timeout_ms),
    createdAt: row.created_at,
    scheduledAt: row.scheduled_at,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    heartbeatAt: row.heartbeat_at,
    wakeAt: row.wake_at,
    leaseOwner: row.lease_owner,
    leaseExpiry: row.lease_expiry,
    leaseGeneration: Number(row.lease_generation),
    input: row.input,
    output: row.output,
    progress: row.progress,
    error: row.error,
    errorKind: row.error_kind as ErrorKind | null,
    attempts: toAttempts(row),
  };
}

/**
 * A step's attempts: those the database kept, then the one its own row
 * holds, when that one completed the step or runs now (a completion records
 * nothing else, so it costs the hot path nothing).
 */
function toAttempts(row: StepRow): StepAttempt[] {
  const attempts = row.attempts.map(toAttempt);
  if (OWN_ATTEMPT.has(row.node_type) && row.started_at !== null && (row.state === 'running' || row.state === 'completed')) {
    const completed = row.state === 'completed';
    attempts.push({
      attempt: row.attempt,
      startedAt: row.started_at,
      finishedAt: completed ? row.finished_at : null,
      outcome: completed ? 'completed' : null,
      worker: row.lease_owner,
    });
  }
  return attempts.slice(-ATTEMPTS_SHOWN);
}

function toAttempt(json: AttemptJson): StepAttempt {
  return {
    attempt: json.attempt,
    startedAt: new Date(json.started_at),
    finishedAt: new Date(json.finished_at),
    outcome: json.outcome,
    ...(json.error === null ? {} : { error: json.error }),
    ...(json.error_kind === null ? {} : { errorKind: json.error_kind as ErrorKind }),
    ...(json.stack === null ? {} : { stack: json.stack }),
    worker: json.worker,
  };
}
