import type { Logger } from '@nestjs/common';
import { toMs } from '../../common/duration.js';
import { errorMessage } from '../../common/error-message.js';
import { isInstance } from '../../common/is-instance.js';
import { PermanentError } from '../../errors/permanent.error.js';
import type { InlineContext, InlineOptions } from '../../interfaces/workflow-context.interface.js';
import { defaultBackoff } from '../../steps/retry-policy.js';

/** An inline call's options, checked. */
export interface InlineSettings {
  maxAttempts: number;
  timeoutMs: number | undefined;
  backoff: InlineOptions['backoff'];
}

export type InlineOutcome =
  | { ok: true; value: unknown; ranMs: number }
  | { ok: false; error: unknown; errorKind: 'error' | 'timeout' | 'permanent'; ranMs: number };

/** An inline call's attempt that ran past its timeout. */
class InlineTimeout extends Error {
  constructor(ms: number) {
    super(`The inline call timed out after ${ms} ms`);
  }
}

/**
 * One attempt of an inline call's function (`wf.run`), in the workflow's
 * worker: it gets its attempt, the pass's fencing token and a signal that
 * aborts at its timeout (on this worker's clock) or when `stop` does (the
 * pass ended). A timed-out attempt is a failure whatever the function does
 * afterwards.
 */
export async function inlineAttempt(
  fn: (ctx: InlineContext) => unknown,
  settings: InlineSettings,
  attempt: number,
  fencingToken: number,
  stop: AbortSignal,
): Promise<InlineOutcome> {
  const controller = new AbortController();
  const abort = () => controller.abort(stop.reason);
  stop.addEventListener('abort', abort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_resolve, reject) => {
    if (settings.timeoutMs === undefined) return;
    timer = setTimeout(() => {
      const error = new InlineTimeout(settings.timeoutMs!);
      controller.abort(error);
      reject(error);
    }, settings.timeoutMs);
  });
  const began = performance.now();
  const ranMs = () => Math.round(performance.now() - began);
  try {
    const value = await Promise.race([Promise.resolve().then(() => fn({ attempt, signal: controller.signal, fencingToken })), timedOut]);
    return { ok: true, value, ranMs: ranMs() };
  } catch (error) {
    const errorKind = error instanceof InlineTimeout ? 'timeout' : isInstance(error, PermanentError) ? 'permanent' : 'error';
    return { ok: false, error, errorKind, ranMs: ranMs() };
  } finally {
    clearTimeout(timer);
    stop.removeEventListener('abort', abort);
  }
}

/**
 * The wait before an inline call's next attempt: its own backoff, else the
 * default. A backoff that throws or gives no duration falls back to the
 * default, so the failure is still recorded.
 */
export function inlineBackoff(settings: InlineSettings, call: string, attempt: number, logger: Logger): number {
  if (!settings.backoff) return defaultBackoff(attempt);
  try {
    return toMs(settings.backoff(attempt), 'backoff');
  } catch (err) {
    logger.error(`The backoff of ${call} failed for attempt ${attempt} (${errorMessage(err)}); using the default backoff.`);
    return defaultBackoff(attempt);
  }
}
