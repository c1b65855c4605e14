import pg from 'pg';
import { CycloneDatabase } from 'cyclone-nestjs';
import type { CycloneTestEnv } from 'cyclone-nestjs/testing';

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
