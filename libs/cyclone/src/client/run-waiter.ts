import { RUN_FINISHED_CHANNEL } from '../sql/names.js';
import type { CycloneDatabase } from '../database/cyclone-database.js';
import { WATCH_RUN } from '../sql/runs.sql.js';
import type { NotificationListener } from '../notifications/notification-listener.js';

/** Fallback poll while waiting for a run, for when a NOTIFY is lost. */
const POLL_MIN_MS = 200;
const POLL_MAX_MS = 2_000;

/**
 * Waits until `check` reports a result, re-checking when the run's finish is
 * announced over LISTEN and on a backing-off poll in case the announcement
 * was lost. The run is marked as watched and the channel subscribed before
 * the first check, so a finish between the check and the wait is not missed.
 */
export async function waitForRun<T>(
  listener: NotificationListener,
  database: CycloneDatabase,
  runId: string,
  timeoutMs: number,
  check: () => Promise<T | undefined>,
): Promise<T | undefined> {
  let wake: () => void = () => undefined;
  const unsubscribe = listener.on(RUN_FINISHED_CHANNEL, (payload) => {
    if (payload === runId) wake();
  });
  const deadline = Date.now() + timeoutMs;
  let poll = POLL_MIN_MS;
  try {
    await database.query(WATCH_RUN, [runId]);
    for (;;) {
      const result = await check();
      if (result !== undefined) return result;
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(poll, left));
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      poll = Math.min(poll * 2, POLL_MAX_MS);
    }
  } finally {
    unsubscribe();
  }
}
