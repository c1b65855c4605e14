import type { INestApplicationContext } from '@nestjs/common';
import { toMs, type Duration } from '../common/duration.js';
import { LOOP_NAMES, type LoopName } from '../common/loop.js';
import { checkInteger, checkName, checkOptions } from '../common/validate.js';
import { messages } from '../cyclone.messages.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { WaitTimeoutError } from '../errors/wait-timeout.error.js';
import { CycloneStats } from '../runtime/cyclone-stats.js';

/** How long the test kit's waits on the engine wait, unless told. */
export const DEFAULT_WAIT_MS = 30_000;

export interface WaitForPassesOptions {
  /** For `cyclone:claim`: the queue whose claims count. Default: any queue this client serves. */
  queue?: string;
  /** Default 30 s. */
  timeout?: Duration;
}

/**
 * Resolves once `n` passes of `loop` in `app` (a Nest app or application
 * context that imports CycloneModule) have begun and ended after this call:
 * the engine has looked that many times, so what it would have done is done.
 * Use it to prove that something does not happen (a delayed step is not
 * claimed, a discarded one is not retried) without guessing a time.
 * `cyclone:claim` is a queue's claim (only passes that sent a claim count:
 * one that found every slot busy looked for nothing); the other loops are
 * the maintenance loops the health indicator names (`cyclone:recovery`,
 * `cyclone:timers`, `cyclone:schedules`, ...). A failed pass does not
 * count. Throws WaitTimeoutError after `timeout` (default 30 s), and
 * InvalidOptionError for a loop that does not run in the app.
 */
export async function waitForPasses(
  app: INestApplicationContext,
  loop: LoopName,
  n = 1,
  options?: WaitForPassesOptions,
): Promise<void> {
  const opts = checkOptions<WaitForPassesOptions>(options, 'waitForPasses options', ['queue', 'timeout']);
  if (!LOOP_NAMES.includes(loop)) throw new InvalidOptionError(messages.unknownLoop(loop, LOOP_NAMES));
  checkInteger(n, 'n', 1, 1_000);
  const timeoutMs = toMs(opts.timeout ?? DEFAULT_WAIT_MS, 'timeout');
  const queue = opts.queue === undefined ? undefined : checkName(opts.queue, 'queue');
  const stats = app.get(CycloneStats);
  assertRuns(stats, loop, queue);
  const since = performance.now();
  let seen = 0;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      stop();
      reject(new WaitTimeoutError(messages.passesTimedOut(loop, queue, seen, n, timeoutMs)));
    }, timeoutMs);
    const stop = stats.events.observe({
      passEnded: (pass) => {
        if (pass.loop !== loop || pass.startedAt < since || pass.error !== undefined) return;
        if (queue !== undefined && pass.queue !== queue) return;
        if (++seen < n) return;
        clearTimeout(timer);
        stop();
        resolve();
      },
    });
  });
}

/** Fails at once for a loop that would never pass in the app, rather than at the timeout. */
function assertRuns(stats: CycloneStats, loop: LoopName, queue: string | undefined): void {
  if (loop === 'cyclone:claim') {
    const served = stats.servedQueues;
    if (served.size === 0) throw new InvalidOptionError(messages.loopNotRunning(loop, 'this client runs no workers'));
    if (queue !== undefined && !served.has(queue)) {
      throw new InvalidOptionError(
        messages.loopNotRunning(loop, `this client does not serve queue "${queue}" (it serves ${[...served.keys()].join(', ')})`),
      );
    }
    return;
  }
  if (queue !== undefined) throw new InvalidOptionError(messages.loopNotRunning(`${loop} of a queue`, "only cyclone:claim is a queue's"));
  if (!stats.loopStates().some((state) => state.name === loop)) {
    throw new InvalidOptionError(
      messages.loopNotRunning(loop, 'the loop was not started (an enqueue-only client has no poll loop; metrics need CycloneMetricsModule)'),
    );
  }
}
