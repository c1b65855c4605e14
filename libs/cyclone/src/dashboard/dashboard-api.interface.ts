import type { RunInfo, RunState, StepInfo } from '../interfaces/run-info.interface.js';
import type { ScheduleInfo } from '../interfaces/schedule-info.interface.js';

/*
 * What the dashboard's JSON API answers (`${path}/api/...`): the one
 * definition of its wire types. The server returns these; the page reads
 * them as `Wire<...>` of them (ui/api-types.ts), dates as ISO 8601 strings.
 */

/** A value as JSON carries it: a Date becomes its ISO 8601 string, the rest keeps its shape. */
export type Wire<T> = T extends Date
  ? string
  : T extends readonly (infer U)[]
    ? Wire<U>[]
    : T extends object
      ? { [K in keyof T]: Wire<T[K]> }
      : T;

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
  /** With broker dispatch on: outbox rows of the queue due and not yet published, and the oldest one's age in ms. */
  outbox: { rows: number; oldestMs: number | null } | null;
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
  /**
   * getRun's answer, with the name, type and due time the runs list shows,
   * and for a workflow written as code the version of it this app runs (null
   * when it runs none): a run of a newer version waits for a client that has it.
   */
  run: RunInfo & { name: string; type: 'job' | 'workflow'; dueAt: Date | null; versionHere: number | null };
  /** Its nodes, as listSteps gives them (with each one's progress and attempts). */
  steps: StepInfo[];
  /** The time of the answer, on the server's clock: a node scheduled later than this waits to run. */
  at: Date;
}

export interface DashboardSchedules {
  schedules: ScheduleInfo[];
}

/** The names the runs page's pickers offer: those that have runs, or that clients registered. */
export interface DashboardNames {
  /** Step kinds and workflow names. */
  kinds: string[];
  queues: string[];
}

/** A queue's finished steps per minute over the last hour, oldest minute first. */
export interface DashboardThroughput {
  queue: string;
  minutes: {
    /** The minute's start. */
    at: Date;
    completed: number;
    /** Discarded: their runs failed (unless retried). */
    failed: number;
    /** Estimated from the latest finished steps of a busy minute, rather than counted. */
    estimated: boolean;
  }[];
  at: Date;
}

/** A client running now, as its row in cyclone_clients and its leases show it. */
export interface DashboardClient {
  /** The lease owner of the steps it runs: `host:pid:random`. */
  id: string;
  host: string;
  pid: number;
  /** The queues it serves: its slots, and how many of them run a step now. */
  queues: { name: string; slots: number; running: number }[];
  /** The version of cyclone-nestjs it runs. */
  version: string | null;
  startedAt: Date;
  /** Its last refresh of its row. */
  heartbeatAt: Date;
}

export interface DashboardClients {
  clients: DashboardClient[];
  /** How often clients refresh their rows; one that has not for three times as long is gone. */
  refreshIntervalSeconds: number;
  at: Date;
}

/** The runs a bulk action would act on, for the operator to confirm. */
export interface DashboardBulkPreview {
  action: BulkAction;
  /** Runs the filters match in a state the action applies to (failed for retry, running or paused for cancel). */
  count: number;
  /** The newest of them: the action leaves runs created after it alone. Null when there is none. */
  upTo: string | null;
  /** More match than one action takes (`limit`): narrow the filters. */
  tooMany: boolean;
  limit: number;
}

/** What a bulk action did: it acts on at most the runs confirmed, each in its own transaction. */
export interface DashboardBulkResult {
  action: BulkAction;
  /** Runs it found to act on. */
  matched: number;
  /** Runs it retried or cancelled. */
  changed: number;
  /** Runs it could not act on, and why (another run took a retried run's unique key, say). */
  failed: { runId: string; message: string }[];
}

export type BulkAction = 'retry' | 'cancel';

/** What an action changed. */
export interface DashboardActionResult {
  /** False when there was nothing to do (already cancelled, already paused, ...). */
  changed: boolean;
  /** For retries: how many nodes were reopened. */
  reopened?: number;
}
