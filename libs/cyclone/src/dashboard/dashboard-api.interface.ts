import type { RunInfo, RunState, StepInfo } from '../interfaces/run-info.interface.js';
import type { ScheduleInfo } from '../interfaces/schedule-info.interface.js';

/*
 * What the dashboard's JSON API answers (`${path}/api/...`). Dates are ISO
 * 8601 strings on the wire.
 */

export interface DashboardQueue {
  name: string;
  /** Due steps waiting for a worker. */
  available: number;
  /** Steps due later: delayed enqueues, retries in backoff, snoozes. */
  scheduled: number;
  running: number;
  /** Discarded steps still kept (their runs failed, unless retried). */
  failed: number;
  /** Steps of paused runs. */
  paused: number;
  /** How long the oldest due step has waited, in ms; null when none is due. */
  oldestAvailableMs: number | null;
  /** Claiming is stopped on every client (pauseQueue). */
  isPaused: boolean;
  /** Whether this process runs workers for the queue. */
  servedHere: boolean;
  throughput: {
    /** Steps completed and discarded per minute, over the last `windowSeconds` (or the latest of them). */
    completedPerMinute: number;
    failedPerMinute: number;
  };
}

export interface DashboardQueues {
  queues: DashboardQueue[];
  throughputWindowSeconds: number;
  /** The time of the answer, on the server's clock. */
  at: Date;
}

export interface DashboardRunSummary {
  id: string;
  /** The step kind of a standalone job, or the workflow's name. */
  name: string;
  type: 'job' | 'workflow';
  state: RunState;
  queue: string;
  uniqueKey: string | null;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
  /**
   * When a running run that waits only for delayed steps (processIn or
   * processAt, a retry's backoff, a snooze) is due: the pages show it as
   * scheduled. Null otherwise.
   */
  dueAt: Date | null;
}

export interface DashboardRuns {
  runs: DashboardRunSummary[];
  /** Cursor for the next page of older runs (`before`), or null at the end. */
  older: string | null;
  /** Cursor for the page of newer runs (`after`), or null on the first page. */
  newer: string | null;
}

export interface DashboardRun {
  /** getRun's answer, with the name, type and due time the runs list shows. */
  run: RunInfo & { name: string; type: 'job' | 'workflow'; dueAt: Date | null };
  /** Its nodes, as listSteps gives them (with each one's progress). */
  steps: StepInfo[];
}

export interface DashboardSchedules {
  schedules: ScheduleInfo[];
}

/** What an action changed. */
export interface DashboardActionResult {
  /** False when there was nothing to do (already cancelled, already paused, ...). */
  changed: boolean;
  /** For retries: how many nodes were reopened. */
  reopened?: number;
}
