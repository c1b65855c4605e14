import type { Logger } from '@nestjs/common';
import { toMs } from '../common/duration.js';
import { errorMessage } from '../common/error-message.js';
import type { RegisteredStep } from './registered-step.js';

/** First retry after about one second, doubling each attempt. */
const BASE_MS = 1_000;
/** Retries never wait more than about an hour. */
const CAP_MS = 3_600_000;
/** ±10 %: retries of jobs that failed together spread out instead of returning together. */
const JITTER = 0.1;

/**
 * The default backoff: exponential from 1 s to about 1 h, with jitter.
 * `attempt` is the attempt that just failed, from 1.
 */
export function defaultBackoff(attempt: number): number {
  const exponential = Math.min(BASE_MS * 2 ** Math.max(attempt - 1, 0), CAP_MS);
  return Math.round(exponential * (1 - JITTER + Math.random() * 2 * JITTER));
}

/** A broken backoff function is reported at most this often per kind, not on every job. */
const REPORT_EVERY_MS = 60_000;
const reported = new WeakMap<RegisteredStep, number>();

/**
 * The delay before retrying `attempt` of a step: its own backoff, else the
 * default. A backoff function is user code: if it throws or returns no valid
 * duration, the default is used, so the failure is still recorded instead of
 * the step staying running until its lease expires.
 */
export function retryDelay(step: RegisteredStep | undefined, attempt: number, logger: Logger): number {
  if (!step?.backoff) return defaultBackoff(attempt);
  try {
    return toMs(step.backoff(attempt), 'backoff');
  } catch (err) {
    const last = reported.get(step);
    if (last === undefined || Date.now() - last >= REPORT_EVERY_MS) {
      reported.set(step, Date.now());
      logger.error(
        `The backoff of step kind "${step.kind}" failed for attempt ${attempt} ` +
          `(${errorMessage(err)}); using the default backoff. Make it return a Duration.`,
      );
    }
    return defaultBackoff(attempt);
  }
}

/**
 * The step's own delays after each attempt but the last (element n - 1
 * after attempt n), stored with the step so that any replica applies them,
 * also one that does not run the kind (its sweep consumes timed-out
 * attempts). Null for a step with the default backoff, which every replica
 * computes alike.
 */
export function backoffSchedule(step: RegisteredStep, maxAttempts: number, logger: Logger): number[] | null {
  if (!step.backoff || maxAttempts <= 1) return null;
  const delays = new Array<number>(maxAttempts - 1);
  for (let attempt = 1; attempt < maxAttempts; attempt++) delays[attempt - 1] = retryDelay(step, attempt, logger);
  return delays;
}
