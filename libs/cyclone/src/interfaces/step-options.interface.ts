import type { Duration } from '../common/duration.js';

/** Retry delay after a failed attempt; `attempt` is the attempt that just failed (1-based). */
export type BackoffFunction = (attempt: number) => Duration;

/** Defaults of a step kind; every one can be overridden per enqueue except `backoff`. */
export interface StepOptions {
  queue?: string;
  priority?: number;
  /** Per-attempt timeout; unlimited when unset. */
  timeout?: Duration;
  /** Attempts before the step is discarded. Default 5. */
  maxAttempts?: number;
  backoff?: BackoffFunction;
  retention?: Duration;
  maxReclaims?: number;
}
