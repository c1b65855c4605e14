/**
 * A publisher that crashes between XADD and COMMIT, for the broker dispatch
 * fault tests: it takes every outbox row in a transaction (FOR UPDATE SKIP
 * LOCKED, as Cyclone's publisher does, so the publishers of the workers skip
 * them), waits until they are all due, adds each to its queue's stream
 * (shard 0: the tests run with one shard), deletes them, and then, its
 * transaction still open, reports { type: 'published', count } and waits to
 * be killed. Its fields are those of Cyclone's messages (step, run, kind,
 * type). Settings: CRASH_DATABASE_URL, CRASH_REDIS_URL.
 */
import pg from 'pg';
import { createClient } from 'redis';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  process.on('disconnect', () => process.exit(0));
  const db = new pg.Client({ connectionString: process.env.CRASH_DATABASE_URL });
  await db.connect();
  const redis = createClient({ url: process.env.CRASH_REDIS_URL });
  await redis.connect();
  await db.query('BEGIN');
  const { rows } = await db.query<{ id: string; step_id: string; run_id: string; queue: string; kind: string | null; node_type: string }>(
    'SELECT id, step_id, run_id, queue, kind, node_type FROM cyclone_outbox ORDER BY id FOR UPDATE SKIP LOCKED',
  );
  process.send?.({ type: 'locked', count: rows.length });
  for (;;) {
    const { rows: due } = await db.query<{ waiting: number }>(
      'SELECT count(*)::int AS waiting FROM cyclone_outbox WHERE id = ANY ($1::bigint[]) AND due_at > clock_timestamp()',
      [rows.map((r) => r.id)],
    );
    if (due[0].waiting === 0) break;
    await pause(20);
  }
  for (const row of rows) {
    await redis.xAdd(`cyclone:stream:${row.queue}:0`, '*', { step: row.step_id, run: row.run_id, kind: row.kind ?? '', type: row.node_type });
  }
  await db.query('DELETE FROM cyclone_outbox WHERE id = ANY ($1::bigint[])', [rows.map((r) => r.id)]);
  process.send?.({ type: 'published', count: rows.length });
  // The COMMIT never comes.
  await new Promise<never>(() => undefined);
}

main().catch((err: unknown) => {
  process.stderr.write(`outbox-crash ${process.pid} failed: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
