import type { ErrorKind, NodeType, RunState, StepAttemptOutcome, StepState } from '../sql/names.js';

export type { ErrorKind, NodeType, RunState, StepAttemptOutcome, StepState };

export interface RunInfo {
  id: string;
  /** The step kind of a standalone job; null for a workflow run. */
  kind: string | null;
  workflow: string | null;
  /** The version of the code workflow that started the run; null for jobs and DAG runs. */
  version: number | null;
  /** The run whose `wf.startChild` started this one, or null. */
  parentId: string | null;
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
  /**
   * The step kind; a code workflow's own node has the workflow's name, a
   * child node its child's workflow or kind; null for other nodes, which run
   * no handler.
   */
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
  /** When the node was written: a DAG's with its run, a code workflow's by the pass that made the call. */
  createdAt: Date;
  scheduledAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  heartbeatAt: Date | null;
  /** When a sleep fires or a signal wait times out. */
  wakeAt: Date | null;
  leaseOwner: string | null;
  leaseExpiry: Date | null;
  leaseGeneration: number;
  /**
   * The node's own input: a code workflow's step (`wf.step`) or child
   * (`wf.startChild`), or the run id a `wf.result` waits for; null for a node
   * that takes the run's input.
   */
  input: unknown;
  output: unknown;
  /** The last progress its handler reported with `ctx.progress()` in its latest attempt; null when none. */
  progress: unknown;
  error: string | null;
  errorKind: ErrorKind | null;
  /**
   * Its attempts, oldest first: the last 20, each as it ended (or runs now).
   * Empty for a node that ran no handler yet, and for signal and sleep nodes.
   */
  attempts: StepAttempt[];
}

/** One attempt of a step. */
export interface StepAttempt {
  /**
   * `ctx.attempt` of the attempt. A reclaim or a snooze consumes no attempt,
   * so the attempt after one runs with the same number.
   */
  attempt: number;
  startedAt: Date;
  /** Null while it runs. */
  finishedAt: Date | null;
  /** What ended it (the words of `cyclone_steps_finished_total`'s outcome label); null while it runs. */
  outcome: StepAttemptOutcome | null;
  /** What the handler threw, the timeout, or why the lease was given up; absent when it did not fail. */
  error?: string;
  errorKind?: ErrorKind;
  /** The stack of the Error its handler threw, as stored (cut at 10,000 characters). */
  stack?: string;
  /** The client that ran it (its id, `host:pid:random`: the lease owner). */
  worker: string | null;
}
