import type { Duration } from '../common/duration.js';

export interface EnqueueOptions {
  /** Queue to run on; default the step's queue, else `default`. */
  queue?: string;
  /** Higher is claimed first; from -1000 to 1000, default 0. */
  priority?: number;
  /** Delay before the job becomes claimable, measured on the database clock. */
  processIn?: Duration;
  /** Earliest time the job may be claimed. */
  processAt?: Date;
  /** Per-attempt timeout; wins over the step's. */
  timeout?: Duration;
  maxAttempts?: number;
  /** How long the finished run is kept. */
  retention?: Duration;
  /** At most one unfinished run holds this key; a second enqueue throws `DuplicateError`. */
  unique?: string;
  maxReclaims?: number;
}

export const ENQUEUE_OPTION_NAMES = [
  'queue',
  'priority',
  'processIn',
  'processAt',
  'timeout',
  'maxAttempts',
  'retention',
  'unique',
  'maxReclaims',
] as const;
