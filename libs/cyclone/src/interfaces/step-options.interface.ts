import type { Duration } from '../common/duration.js';

/** Retry delay after a failed attempt; `attempt` is the attempt that just failed (1-based). */
export type BackoffFunction = (attempt: number) => Duration;

/** Gives the key a limit is counted under, from a job's input; must return a string. */
export type FlowKeyFunction<I = any> = (input: I) => string;

/** At most `limit` running steps of the kind in the whole cluster, per key when `key` is given. */
export interface ConcurrencyOptions<I = any> {
  limit: number;
  key?: FlowKeyFunction<I>;
}

/** At most `limit` starts of the kind per window `per`, cluster-wide, per key when `key` is given. */
export interface RateLimitOptions<I = any> {
  limit: number;
  per: Duration;
  key?: FlowKeyFunction<I>;
}

/** What a schedule does with ticks it missed while no client ran: start the latest once, or skip them. */
export type CatchUp = 'none' | 'latest';

/** A durable cron schedule of a step kind. */
export interface StepScheduleOptions<I = any> {
  /** 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first. */
  cron: string;
  /** IANA time zone the expression is read in. Default UTC. */
  timezone?: string;
  /** The input of each scheduled run. Default null. */
  input?: I;
  /** Default 'latest'. */
  catchUp?: CatchUp;
}

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
  /** A cluster-wide concurrency limit; enforced when steps are claimed. */
  concurrency?: ConcurrencyOptions;
  /** A cluster-wide rate limit on starts; enforced when steps are claimed. */
  rateLimit?: RateLimitOptions;
  /** Runs the kind on a cron schedule, named by the kind: an expression, or its options. */
  schedule?: string | StepScheduleOptions;
}
