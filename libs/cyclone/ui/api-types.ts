/*
 * The API's answers as the page reads them (JSON: dates are ISO strings).
 * The server's declarations are in src/dashboard/dashboard-api.interface.ts;
 * the browser tests check that both sides agree.
 */

export type RunState = 'running' | 'paused' | 'completed' | 'failed' | 'cancelled';

export interface Queue {
  name: string;
  available: number;
  scheduled: number;
  running: number;
  failed: number;
  paused: number;
  oldestAvailableMs: number | null;
  isPaused: boolean;
  servedHere: boolean;
  throughput: { completedPerMinute: number; failedPerMinute: number };
}

export interface QueuesAnswer {
  queues: Queue[];
  throughputWindowSeconds: number;
  at: string;
}

export interface RunSummary {
  id: string;
  name: string;
  type: 'job' | 'workflow';
  state: RunState;
  queue: string;
  uniqueKey: string | null;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
  /** When a run that waits only for delayed steps is due; null otherwise. */
  dueAt: string | null;
}

export interface RunsAnswer {
  runs: RunSummary[];
  older: string | null;
  newer: string | null;
}

export interface Step {
  id: string;
  nodeId: string;
  kind: string | null;
  type: 'step' | 'signal' | 'sleep';
  after: string[];
  state: string;
  queue: string;
  priority: number;
  attempt: number;
  maxAttempts: number;
  reclaims: number;
  maxReclaims: number | null;
  timeoutMs: number | null;
  scheduledAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  heartbeatAt: string | null;
  wakeAt: string | null;
  leaseOwner: string | null;
  leaseExpiry: string | null;
  output: unknown;
  error: string | null;
  errorKind: string | null;
  progress: unknown;
}

export interface RunAnswer {
  run: RunSummary & { kind: string | null; workflow: string | null; input: unknown };
  steps: Step[];
}

export interface Schedule {
  name: string;
  kind: string;
  cron: string;
  timezone: string | null;
  nextTickAt: string | null;
  lastTickAt: string | null;
}

export interface SchedulesAnswer {
  schedules: Schedule[];
}

export interface ActionResult {
  changed: boolean;
  reopened?: number;
}
