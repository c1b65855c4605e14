import { sqlStateOf, UNDEFINED_FUNCTION } from './database-fault.js';

/** How long calls go to the previous version's statement before the newer one is tried again. */
const RETRY_NEWER_MS = 1_000;

/**
 * A call that needs a function of this client's schema version, with the
 * statement the previous version offers for it: while the database lacks
 * the function (a deploy that runs `cyclone migrate` after the app has
 * started), calls go to the previous one, and the newer one is tried again
 * every second. A failed call wrote nothing, so trying the other is safe.
 */
export class SchemaFallback {
  private previousUntil = 0;

  async run<T>(current: () => Promise<T>, previous: () => Promise<T>): Promise<T> {
    if (performance.now() < this.previousUntil) return previous();
    try {
      return await current();
    } catch (err) {
      if (sqlStateOf(err) !== UNDEFINED_FUNCTION) throw err;
      this.previousUntil = performance.now() + RETRY_NEWER_MS;
      return previous();
    }
  }
}
