import { optionalMs, optionalPositiveMs } from '../common/duration.js';
import { checkInteger, checkName, checkOptions } from '../common/validate.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { describeValue, messages } from '../cyclone.messages.js';
import {
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_QUEUE,
  MAX_ATTEMPTS_LIMIT,
  MAX_PRIORITY,
  MIN_PRIORITY,
} from '../cyclone.constants.js';
import {
  ENQUEUE_OPTION_NAMES,
  type EnqueueOptions,
  type OnConflict,
  type UniqueOptions,
} from '../interfaces/enqueue-options.interface.js';
import type { RegisteredStep } from './registered-step.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import type { StatementParams } from '../database/statement.js';
import type { ENQUEUE_JOB, ENQUEUE_JOBS } from '../sql/enqueue.sql.js';

/** A standalone job's row values: enqueue options over step defaults over module defaults. */
export interface JobParams {
  kind: string;
  queue: string;
  uniqueKey: string | null;
  /** What to do when the key is held. */
  onConflict: OnConflict;
  /** Push the holder back by this much on each enqueue with its key. */
  debounceMs: number | null;
  retentionMs: number;
  priority: number;
  maxAttempts: number;
  maxReclaims: number | null;
  timeoutMs: number | null;
  processAt: Date | null;
  processInMs: number;
}

/** The earliest time PostgreSQL's timestamptz holds: 4714-11-24 00:00 UTC BC. */
const EARLIEST_TIMESTAMP_MS = -210_866_803_200_000;

/**
 * Checks every enqueue option before anything is written, naming the option
 * at fault. `where` names the options in messages (a workflow node's).
 */
export function jobParams(
  step: RegisteredStep,
  given: EnqueueOptions | undefined,
  module: ResolvedOptions,
  where = 'enqueue options',
): JobParams {
  const opts = checkOptions<EnqueueOptions>(given, where, ENQUEUE_OPTION_NAMES);
  if (opts.processAt !== undefined && opts.processIn !== undefined) {
    throw new InvalidOptionError(messages.conflictingOptions('processAt', 'processIn'));
  }
  if (opts.processAt !== undefined && !isValidDate(opts.processAt)) {
    throw new InvalidOptionError(messages.invalidDate('processAt', opts.processAt));
  }
  if (opts.processAt !== undefined && Date.prototype.getTime.call(opts.processAt) < EARLIEST_TIMESTAMP_MS) {
    throw new InvalidOptionError(messages.dateOutOfRange('processAt', opts.processAt));
  }
  const unique = uniqueOptions(opts.unique);
  const maxReclaims =
    opts.maxReclaims !== undefined
      ? checkInteger(opts.maxReclaims, 'maxReclaims', 0, 1_000_000)
      : (step.maxReclaims ?? module.maxReclaims);
  return {
    kind: step.kind,
    queue: opts.queue !== undefined ? checkName(opts.queue, 'queue') : (step.queue ?? DEFAULT_QUEUE),
    uniqueKey: unique.key,
    onConflict: unique.onConflict,
    debounceMs: unique.debounceMs,
    retentionMs: optionalMs(opts.retention, 'retention') ?? step.retentionMs ?? module.retentionMs,
    priority:
      opts.priority !== undefined
        ? checkInteger(opts.priority, 'priority', MIN_PRIORITY, MAX_PRIORITY)
        : (step.priority ?? 0),
    maxAttempts:
      opts.maxAttempts !== undefined
        ? checkInteger(opts.maxAttempts, 'maxAttempts', 1, MAX_ATTEMPTS_LIMIT)
        : (step.maxAttempts ?? DEFAULT_MAX_ATTEMPTS),
    maxReclaims,
    timeoutMs: optionalPositiveMs(opts.timeout, 'timeout') ?? step.timeoutMs ?? null,
    // A copy: a Date is mutable, and the caller's may change before the statement is sent.
    processAt: opts.processAt === undefined ? null : new Date(Date.prototype.getTime.call(opts.processAt)),
    // A debounced run starts a debounce after its first enqueue, unless told otherwise.
    processInMs: optionalMs(opts.processIn, 'processIn') ?? (opts.processAt === undefined ? (unique.debounceMs ?? 0) : 0),
  };
}

/** A real Date (not a look-alike or a proxy) holding a time. */
function isValidDate(value: unknown): value is Date {
  try {
    return value instanceof Date && !Number.isNaN(Date.prototype.getTime.call(value));
  } catch {
    return false;
  }
}

const UNIQUE_KEYS = ['key', 'onConflict', 'debounce'] as const;

/** The `unique` option, a key or `{ key, onConflict, debounce }`, checked. */
export function uniqueOptions(unique: string | UniqueOptions | undefined): {
  key: string | null;
  onConflict: OnConflict;
  debounceMs: number | null;
} {
  if (unique === undefined) return { key: null, onConflict: 'error', debounceMs: null };
  if (typeof unique === 'string') return { key: checkName(unique, 'unique'), onConflict: 'error', debounceMs: null };
  if (typeof unique !== 'object' || unique === null) {
    throw new InvalidOptionError(
      `Option "unique" must be a string key or { key, onConflict, debounce }; got ${describeValue(unique)}.`,
    );
  }
  // An options object, read once (see checkOptions).
  const options = checkOptions<UniqueOptions>(unique, '"unique" option', UNIQUE_KEYS);
  const key = checkName(options.key, 'unique.key');
  const debounceMs = optionalPositiveMs(options.debounce, 'unique.debounce') ?? null;
  const onConflict = options.onConflict ?? (debounceMs !== null ? 'keep' : 'error');
  if (onConflict !== 'error' && onConflict !== 'keep' && onConflict !== 'replace') {
    throw new InvalidOptionError(
      `Option "unique.onConflict" must be 'error', 'keep' or 'replace'; got ${describeValue(onConflict)}.`,
    );
  }
  if (debounceMs !== null && onConflict === 'error') {
    throw new InvalidOptionError(
      'Option "unique.debounce" pushes the holder back and returns its run id, so it cannot go with onConflict \'error\'; ' +
        "use 'keep' (the default with debounce) or 'replace'.",
    );
  }
  return { key, onConflict, debounceMs };
}

/** Parameters of ENQUEUE_JOB for one job. */
export function enqueueJobValues(job: NewJob, notify: boolean): StatementParams<typeof ENQUEUE_JOB> {
  const p = job.params;
  return [
    job.runId,
    p.kind,
    job.inputJson,
    p.queue,
    p.uniqueKey,
    p.retentionMs,
    p.priority,
    p.maxAttempts,
    p.maxReclaims,
    p.timeoutMs,
    p.processAt,
    p.processInMs,
    notify,
    job.traceContext,
    backoffLiteral(job.backoffMs),
    job.keys[0],
    job.keys[1],
  ];
}

/** A step's backoff as a PostgreSQL array literal, for a text parameter cast to bigint[]. */
function backoffLiteral(backoffMs: number[] | null): string | null {
  return backoffMs === null ? null : `{${backoffMs.join(',')}}`;
}

/** One job of an ENQUEUE_JOBS statement. */
export interface NewJob {
  runId: string;
  params: JobParams;
  inputJson: string;
  /** The enqueuer's trace context, stored with the run. */
  traceContext: string | null;
  /** The step's own delay after each attempt, or null for the default backoff. */
  backoffMs: number[] | null;
  /** Its kind's limits' keys for its input (flowKeys). */
  keys: [string | null, string | null];
}

/** Parameters of ENQUEUE_JOBS: one array per column. */
export function enqueueJobsValues(jobs: NewJob[]): StatementParams<typeof ENQUEUE_JOBS> {
  return [
    jobs.map((j) => j.runId),
    jobs.map((j) => j.params.kind),
    jobs.map((j) => j.inputJson),
    jobs.map((j) => j.params.queue),
    jobs.map((j) => j.params.retentionMs),
    jobs.map((j) => j.params.priority),
    jobs.map((j) => j.params.maxAttempts),
    jobs.map((j) => j.params.maxReclaims),
    jobs.map((j) => j.params.timeoutMs),
    jobs.map((j) => j.params.processAt),
    jobs.map((j) => j.params.processInMs),
    jobs.map((j) => j.traceContext),
    jobs.map((j) => backoffLiteral(j.backoffMs)),
    jobs.map((j) => j.keys[0]),
    jobs.map((j) => j.keys[1]),
  ];
}
