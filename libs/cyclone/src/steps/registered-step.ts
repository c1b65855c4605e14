import type { BackoffFunction } from '../interfaces/step-options.interface.js';
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
}
