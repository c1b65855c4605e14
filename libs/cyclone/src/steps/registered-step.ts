import type { BackoffFunction, StepOptions } from '../interfaces/step-options.interface.js';
import type { FlowLimits } from './flow-limits.js';
import type { StepContext } from '../interfaces/step-context.interface.js';

/** A discovered handler with its options validated and durations in ms. */
export interface RegisteredStep {
  kind: string;
  /** `Class.method`, for messages. */
  host: string;
  handler: (input: unknown, ctx: StepContext) => unknown;
  queue: string | undefined;
  priority: number | undefined;
  timeoutMs: number | undefined;
  maxAttempts: number | undefined;
  backoff: BackoffFunction | undefined;
  retentionMs: number | undefined;
  maxReclaims: number | undefined;
  /** Concurrency and rate limits, enforced where steps are claimed. */
  flow: FlowLimits | undefined;
  /** Its schedule as declared; compiled (and checked) with the module's schedules at startup. */
  schedule: StepOptions['schedule'];
}
