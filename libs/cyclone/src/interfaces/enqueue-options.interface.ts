import type { Duration } from '../common/duration.js';

/** What an enqueue does when an unfinished run already holds its unique key. */
export type OnConflict = 'error' | 'keep' | 'replace';

export interface UniqueOptions {
  key: string;
  /**
   * `'error'` (default) throws `DuplicateError`; `'keep'` returns the holder's
   * run id; `'replace'` gives the holder this enqueue's input when it has not
   * started yet (and throws `DuplicateError` when it has), and returns its run id.
   */
  onConflict?: OnConflict;
  /**
   * The run starts this long after the last enqueue with its key: the first
   * enqueue schedules it that far ahead, each later one pushes the holder back
   * again while it has not started. Implies `onConflict: 'keep'` unless
   * `'replace'` is given.
   */
  debounce?: Duration;
}

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
  /**
   * At most one unfinished run holds this key. A string is `{ key }`: a second
   * enqueue throws `DuplicateError`.
   */
  unique?: string | UniqueOptions;
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
