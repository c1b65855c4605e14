import { optionalMs, optionalPositiveMs } from '../common/duration.js';
import { checkInteger, checkKnownKeys, checkName } from '../common/validate.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { messages } from '../cyclone.messages.js';
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
import { uuid7 } from '../common/uuid7.js';
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

/** Checks every enqueue option before anything is written, naming the option at fault. */
export function jobParams(step: RegisteredStep, opts: EnqueueOptions, module: ResolvedOptions): JobParams {
  if (typeof opts !== 'object' || opts === null) {
    throw new InvalidOptionError('Enqueue options must be an object.');
  }
  checkKnownKeys('enqueue options', opts, ENQUEUE_OPTION_NAMES);
  if (opts.processAt !== undefined && opts.processIn !== undefined) {
    throw new InvalidOptionError(messages.conflictingOptions('processAt', 'processIn'));
  }
  if (opts.processAt !== undefined && !(opts.processAt instanceof Date && !Number.isNaN(opts.processAt.getTime()))) {
    throw new InvalidOptionError(messages.invalidDate('processAt', opts.processAt));
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
    processAt: opts.processAt ?? null,
    // A debounced run starts a debounce after its first enqueue, unless told otherwise.
    processInMs: optionalMs(opts.processIn, 'processIn') ?? (opts.processAt === undefined ? (unique.debounceMs ?? 0) : 0),
  };
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
      "Option \"unique\" must be a key or an object such as { key: 'report:7', onConflict: 'keep' }.",
    );
  }
  checkKnownKeys('option "unique"', unique, UNIQUE_KEYS);
  const key = checkName(unique.key, 'unique.key');
  const debounceMs = optionalPositiveMs(unique.debounce, 'unique.debounce') ?? null;
  const onConflict = unique.onConflict ?? (debounceMs !== null ? 'keep' : 'error');
  if (onConflict !== 'error' && onConflict !== 'keep' && onConflict !== 'replace') {
    throw new InvalidOptionError(
      `Option "unique.onConflict" must be 'error', 'keep' or 'replace'; got ${JSON.stringify(onConflict)}.`,
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
export function enqueueJobValues(
  p: JobParams,
  inputJson: string,
  notify: boolean,
  [flowKey, rateKey]: [string | null, string | null],
  runId = uuid7(),
): StatementParams<typeof ENQUEUE_JOB> {
  return [
    runId,
    p.kind,
    inputJson,
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
    flowKey,
    rateKey,
  ];
}

/** One job of an ENQUEUE_JOBS statement. */
export interface NewJob {
  runId: string;
  params: JobParams;
  inputJson: string;
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
    jobs.map((j) => j.keys[0]),
    jobs.map((j) => j.keys[1]),
  ];
}
