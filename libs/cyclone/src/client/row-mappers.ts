import type { ErrorKind, NodeType, RunInfo, StepInfo } from '../interfaces/run-info.interface.js';
import type { RunRow, StepRow } from '../sql/runs.sql.js';

export function toRunInfo(row: RunRow): RunInfo {
  return {
    id: row.id,
    kind: row.kind,
    workflow: row.workflow,
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
    scheduledAt: row.scheduled_at,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    heartbeatAt: row.heartbeat_at,
    wakeAt: row.wake_at,
    leaseOwner: row.lease_owner,
    leaseExpiry: row.lease_expiry,
    leaseGeneration: Number(row.lease_generation),
    output: row.output,
    progress: row.progress,
    error: row.error,
    errorKind: row.error_kind as ErrorKind | null,
  };
}
