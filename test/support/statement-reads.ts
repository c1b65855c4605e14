import { expect } from '@jest/globals';
import pg from 'pg';

/**
 * The buffers a statement reads (EXPLAIN ANALYZE BUFFERS) at the last of
 * `calls` calls on one connection, each in a transaction that is rolled back,
 * so nothing it writes stays. `prepare` runs first in each transaction and
 * gives the statement and its parameters; the statement must return `rows`
 * rows. Plans kept per connection are made at the first call (plpgsql's at
 * the sixth), so the last call reads what a worker's connection reads. Of
 * the last two calls, the fewer: a call that had to plan again (another
 * test's DDL can reset this connection's caches) also counts the catalog
 * reads of its planning.
 */
export async function statementReads(
  url: string,
  calls: number,
  rows: number,
  prepare: (client: pg.Client) => Promise<[sql: string, params: unknown[]]>,
): Promise<number> {
  const client = new pg.Client({ connectionString: url, application_name: 'cyclone-test' });
  await client.connect();
  try {
    const reads: number[] = [];
    for (let call = 0; call < calls; call += 1) {
      await client.query('BEGIN');
      try {
        const [sql, params] = await prepare(client);
        const { rows: explained } = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${sql}`, params);
        const plan = explained[0]['QUERY PLAN'][0].Plan;
        expect(plan['Actual Rows']).toBe(rows);
        reads.push(plan['Shared Hit Blocks'] + plan['Shared Read Blocks']);
      } finally {
        await client.query('ROLLBACK');
      }
    }
    return Math.min(...reads.slice(-2));
  } finally {
    await client.end();
  }
}

/**
 * The buffers a claim of up to `limit` steps of `kind` from the default queue
 * reads, after a first call (the claim functions make their plans once a
 * connection, again after an analyse); each call must return `rows` steps.
 */
export function claimReads(url: string, kind: string, limit: number, rows: number): Promise<number> {
  return statementReads(url, 3, rows, async () => [
    `SELECT * FROM cyclone_claim_steps('default', ARRAY[$1], $2, 'probe', 30000)`,
    [kind, limit],
  ]);
}
