import type { ErrorKind, NodeType, RunState, StepState } from '../sql/names.js';

export type { ErrorKind, NodeType, RunState, StepState };

export interface RunInfo {
  id: string;
  /** The step kind of a standalone job; null for a workflow run. */
  kind: string | null;
  workflow: string | null;
  state: RunState;
  queue: string;
  input: unknown;
  uniqueKey: string | null;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
}

export interface StepInfo {
  id: string;
  runId: string;
  nodeId: string;
  /** The step kind; null for signal and sleep nodes, which run no handler. */
  kind: string | null;
  type: NodeType;
  /** Upstream node ids. */
  after: string[];
  state: StepState;
  queue: string;
  priority: number;
  attempt: number;
  maxAttempts: number;
  reclaims: number;
  maxReclaims: number | null;
  /** Per-attempt timeout in milliseconds, or null. */
  timeoutMs: number | null;
  scheduledAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  heartbeatAt: Date | null;
  /** When a sleep fires or a signal wait times out. */
  wakeAt: Date | null;
  leaseOwner: string | null;
  leaseExpiry: Date | null;
  leaseGeneration: number;
  output: unknown;
  /** The last progress its handler reported with `ctx.progress()` in its latest attempt; null when none. */
  progress: unknown;
  error: string | null;
  errorKind: ErrorKind | null;
}
