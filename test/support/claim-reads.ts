import { expect } from '@jest/globals';
import pg from 'pg';

/**
 * The buffers a claim of up to `limit` steps of `kind` from the default queue
 * reads (EXPLAIN ANALYZE BUFFERS), in a transaction that is rolled back, so
 * nothing stays claimed. The claim functions make their plans once a
 * connection (again after an analyse), so this is the second of two calls on
 * one connection: the reads of planning do not count. Each call must return
 * `rows` steps.
 */
export async function claimReads(url: string, kind: string, limit: number, rows: number): Promise<number> {
  const client = new pg.Client({ connectionString: url, application_name: 'cyclone-test' });
  await client.connect();
  try {
    let reads = 0;
    for (let call = 0; call < 2; call += 1) {
      await client.query('BEGIN');
      try {
        const { rows: explained } = await client.query(
          `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM cyclone_claim_steps('default', ARRAY[$1], $2, 'probe', 30000)`,
          [kind, limit],
        );
        const plan = explained[0]['QUERY PLAN'][0].Plan;
        expect(plan['Actual Rows']).toBe(rows);
        reads = plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
      } finally {
        await client.query('ROLLBACK');
      }
    }
    return reads;
  } finally {
    await client.end();
  }
}
