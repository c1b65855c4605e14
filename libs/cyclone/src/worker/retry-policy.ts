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
