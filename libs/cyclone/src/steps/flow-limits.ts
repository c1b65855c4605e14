import { toMs } from '../common/duration.js';
import { checkInteger, checkKnownKeys } from '../common/validate.js';
import { errorMessage } from '../common/error-message.js';
import { InvalidKeyError } from '../errors/invalid-key.error.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import type { FlowKeyFunction, StepOptions } from '../interfaces/step-options.interface.js';

/** The largest limit we accept, far above any cluster's worker count. */
const MAX_LIMIT = 1_000_000;
/** The longest rate window: a year. */
const MAX_WINDOW_MS = 366 * 24 * 3_600_000;

/**
 * A kind's concurrency and rate limits, checked. A concurrency limit with a
 * key is per key (no kind-wide cap), without one it is kind-wide; the same
 * for the rate limit. The claim of such a kind goes round-robin over its
 * keys: the concurrency key's, else the rate key's.
 */
export interface FlowLimits {
  /** Running steps of the kind, cluster-wide. */
  kindCap: number | null;
  /** Running steps of one concurrency key. */
  keyCap: number | null;
  concurrencyKey: FlowKeyFunction | undefined;
  rateLimit: number | null;
  ratePerMs: number | null;
  rateKey: FlowKeyFunction | undefined;
}

/** Whether the claim goes round-robin over keys (some key function is given). */
export function isKeyed(limits: FlowLimits): boolean {
  return limits.concurrencyKey !== undefined || limits.rateKey !== undefined;
}

/** Checks `concurrency` and `rateLimit` of a step's options; undefined when it has neither. */
export function resolveFlowLimits(options: Pick<StepOptions, 'concurrency' | 'rateLimit'>): FlowLimits | undefined {
  const { concurrency, rateLimit } = options;
  if (concurrency === undefined && rateLimit === undefined) return undefined;
  const limits: FlowLimits = {
    kindCap: null,
    keyCap: null,
    concurrencyKey: undefined,
    rateLimit: null,
    ratePerMs: null,
    rateKey: undefined,
  };
  if (concurrency !== undefined) {
    if (typeof concurrency !== 'object' || concurrency === null) {
      throw new InvalidOptionError('Option "concurrency" must be an object such as { limit: 5 } or { limit: 1, key: (input) => input.userId }.');
    }
    checkKnownKeys('option "concurrency"', concurrency, ['limit', 'key']);
    const limit = checkInteger(concurrency.limit, 'concurrency.limit', 1, MAX_LIMIT);
    limits.concurrencyKey = checkKeyFunction(concurrency.key, 'concurrency.key');
    if (limits.concurrencyKey) limits.keyCap = limit;
    else limits.kindCap = limit;
  }
  if (rateLimit !== undefined) {
    if (typeof rateLimit !== 'object' || rateLimit === null) {
      throw new InvalidOptionError("Option \"rateLimit\" must be an object such as { limit: 10, per: '1s' }.");
    }
    checkKnownKeys('option "rateLimit"', rateLimit, ['limit', 'per', 'key']);
    limits.rateLimit = checkInteger(rateLimit.limit, 'rateLimit.limit', 1, MAX_LIMIT);
    if (rateLimit.per === undefined) throw new InvalidOptionError("Option \"rateLimit.per\" is required: the window, such as '1s' or '1m'.");
    const per = toMs(rateLimit.per, 'rateLimit.per');
    if (per < 1 || per > MAX_WINDOW_MS) {
      throw new InvalidOptionError(`Option "rateLimit.per" must be from 1 ms to a year; got ${per} ms.`);
    }
    limits.ratePerMs = per;
    limits.rateKey = checkKeyFunction(rateLimit.key, 'rateLimit.key');
  }
  return limits;
}

function checkKeyFunction(key: unknown, name: string): FlowKeyFunction | undefined {
  if (key === undefined) return undefined;
  if (typeof key !== 'function') throw new InvalidOptionError(`Option "${name}" must be a function (input) => string.`);
  return key as FlowKeyFunction;
}

/**
 * The keys a step of a limited kind is enqueued with, from its input: the
 * flow key (the concurrency key, else the rate key, else '' for kind-wide
 * limits) and the rate key. A key function that throws or gives something
 * other than a string fails the enqueue with InvalidKeyError.
 */
export function flowKeys(kind: string, limits: FlowLimits | undefined, input: unknown): [string | null, string | null] {
  if (!limits) return [null, null];
  const concurrencyKey = limits.concurrencyKey ? callKey(kind, 'concurrency.key', limits.concurrencyKey, input) : undefined;
  const rateKey = limits.rateKey ? callKey(kind, 'rateLimit.key', limits.rateKey, input) : null;
  return [concurrencyKey ?? rateKey ?? '', rateKey];
}

function callKey(kind: string, option: string, fn: FlowKeyFunction, input: unknown): string {
  let key: unknown;
  try {
    key = fn(input);
  } catch (err) {
    throw new InvalidKeyError(kind, option, `threw: ${errorMessage(err)}`, { cause: err });
  }
  if (typeof key !== 'string') {
    const got = key === null ? 'null' : typeof key === 'object' ? 'an object' : `${typeof key} ${String(key)}`;
    throw new InvalidKeyError(kind, option, `returned ${got}, not a string`);
  }
  if (key.includes('\u0000')) throw new InvalidKeyError(kind, option, 'returned a string with a NUL character');
  return key;
}
