import type { Logger } from '@nestjs/common';
import { errorMessage } from '../common/error-message.js';
import { messages } from '../cyclone.messages.js';
import type { CycloneDatabase } from './cyclone-database.js';
import { sqlStateOf, UNDEFINED_FUNCTION } from './database-fault.js';
import type { Queryable } from './statement.js';

/**
 * How many of the pool's connections are warmed at startup, and kept open
 * when Cyclone owns the pool: enough for a lightly loaded client, whose
 * enqueues, completions and claims overlap on two or three connections (the
 * pool lends the most recently returned one first).
 */
export const WARM_CONNECTIONS = 3;

/** A call of a hot statement that writes nothing (empty arrays), on the connection given. */
export type WarmCall = (client: Queryable) => Promise<unknown>;

/**
 * A server process's first call of a Cyclone function costs 15–20 ms more
 * than the next: PL/pgSQL compiles the function, and the planner loads the
 * catalog entries of every partition and index its statements touch, once
 * per server process. Without this, the first jobs after a deploy pay it, one
 * connection at a time. Each call runs with empty arrays: planned and
 * executed, it writes nothing and commits no transaction id.
 *
 * Holds its connections at once (never more than the pool's size), so that
 * each is a different one. A schema older than this client (a rolling
 * deploy whose migration has not run) lacks the functions: nothing is
 * warmed then, and calls fall back as they do at run time.
 */
export async function warmConnections(database: CycloneDatabase, calls: WarmCall[], logger: Logger): Promise<void> {
  const count = Math.min(WARM_CONNECTIONS, database.pool.options.max ?? WARM_CONNECTIONS);
  try {
    await Promise.all(
      Array.from({ length: count }, () =>
        database.withConnection(async (client) => {
          for (const call of calls) await call(client);
        }),
      ),
    );
  } catch (err) {
    if (sqlStateOf(err) === UNDEFINED_FUNCTION) logger.debug(messages.warmSkipped());
    else logger.warn(messages.warmFailed(errorMessage(err)));
  }
}
