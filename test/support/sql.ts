import pg from 'pg';
import { CycloneDatabase } from 'cyclone-nestjs';
import type { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { waitFor } from './wait.js';

/**
 * Runs one statement, straight SQL, on an environment's own pool, or on a
 * database URL with a short-lived client of its own; rows as `pg` returns them.
 */
export async function sql<R extends pg.QueryResultRow = Record<string, any>>(
  on: CycloneTestEnv | string,
  text: string,
  values?: unknown[],
): Promise<R[]> {
  if (typeof on !== 'string') return (await on.app.get(CycloneDatabase).pool.query<R>(text, values)).rows;
  const client = new pg.Client({ connectionString: on, application_name: 'cyclone-test' });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** The server process of a client's connection. */
export async function backendPid(client: pg.ClientBase): Promise<number> {
  return (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
}

/** Waits until the server process `waiter` waits for a lock that `blocker` holds. */
export async function untilBlockedBy(env: CycloneTestEnv, blocker: number, waiter: number, what: string): Promise<void> {
  await waitFor(what, async () => {
    const [{ blocked }] = await sql<{ blocked: boolean }>(env, 'SELECT $1::int = ANY (pg_blocking_pids($2)) AS blocked', [blocker, waiter]);
    return blocked;
  });
}
