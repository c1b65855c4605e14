import type { Duration } from '../common/duration.js';

/** Options of a step node: the enqueue options that make sense per node, and its upstream nodes. */
export interface WorkflowStepOptions {
  /** Nodes that must complete before this one runs. */
  after?: string[];
  queue?: string;
  priority?: number;
  /** Per-attempt timeout; wins over the step's. */
  timeout?: Duration;
  maxAttempts?: number;
  maxReclaims?: number;
}

export interface SignalWaitOptions {
  after?: string[];
  /** How long to wait once the node is reached. Default: forever. */
  timeout?: Duration;
  /**
   * What a timeout does: `'fail'` (default) discards the node with
   * `error_kind = 'signal_timeout'`; `'continue'` completes it with a null
   * output, so the nodes below it run.
   */
  onTimeout?: 'fail' | 'continue';
}

export interface SleepOptions {
  after?: string[];
}

export interface StartOptions {
  /**
   * At most one unfinished run holds this key: a second start throws
   * `DuplicateError`, or with `onConflict: 'keep'` returns the holder's run id.
   * (`'replace'` and `debounce` are for standalone jobs.)
   */
  unique?: string | { key: string; onConflict?: 'error' | 'keep' };
  /** How long the finished run is kept. */
  retention?: Duration;
}

export const WORKFLOW_STEP_OPTION_NAMES = ['after', 'queue', 'priority', 'timeout', 'maxAttempts', 'maxReclaims'] as const;
export const SIGNAL_WAIT_OPTION_NAMES = ['after', 'timeout', 'onTimeout'] as const;
export const SLEEP_OPTION_NAMES = ['after'] as const;
export const START_OPTION_NAMES = ['unique', 'retention'] as const;
