/**
 * W6: history. Fills Cyclone's tables with completed runs (one step each), as
 * months of finished jobs would, straight with SQL, then vacuums and analyses
 * them as autovacuum would have. W1 then runs on top of them.
 */
import pg from 'pg';
import { runner } from './runners/cyclone.js';
import type { ChildContext } from './workloads.js';

export async function seedHistory(ctx: ChildContext, rows: number): Promise<Record<string, number>> {
  // Boot once so the migrations create the schema.
  const producer = await runner.start({ url: ctx.url, workers: 0, poolSize: 10 });
  await producer.stop();
  const client = new pg.Client({ connectionString: ctx.url });
  await client.connect();
  try {
    const t0 = performance.now();
    const chunk = 250_000;
    for (let from = 1; from <= rows; from += chunk) {
      const to = Math.min(rows, from + chunk - 1);
      await client.query('BEGIN');
      await client.query(
        `WITH runs AS (
           INSERT INTO cyclone_runs (id, kind, state, queue, input, retention, created_at, updated_at, finished_at, delete_after)
           -- Time-ordered ids, as Cyclone makes them, dated when each run was created (PostgreSQL 18's uuidv7).
           SELECT uuidv7(interval '-2 days' + g * interval '1 millisecond'), 'bench_job', 'completed', 'default', jsonb_build_object('i', g), interval '30 days',
                  now() - interval '2 days' + g * interval '1 millisecond',
                  now() - interval '2 days' + g * interval '1 millisecond',
                  now() - interval '2 days' + g * interval '1 millisecond',
                  now() + interval '28 days'
             FROM generate_series($1::int, $2::int) AS g
           RETURNING id, created_at, finished_at)
         INSERT INTO cyclone_steps (run_id, node_id, kind, queue, state, attempt, max_attempts, scheduled_at, started_at,
                                    finished_at, heartbeat_at, lease_owner, lease_generation, output, created_at, updated_at)
         SELECT id, 'bench_job', 'bench_job', 'default', 'completed', 1, 5, created_at, created_at,
                finished_at, created_at, 'history', 1, 'null'::jsonb, created_at, finished_at
           FROM runs`,
        [from, to],
      );
      await client.query('COMMIT');
    }
    const insertMs = performance.now() - t0;
    const t1 = performance.now();
    await client.query('VACUUM (ANALYZE) cyclone_runs, cyclone_steps');
    // A long-lived system has checkpointed its history long ago; without this,
    // the checkpoint the bulk load set off runs during the measurement.
    await client.query('CHECKPOINT');
    const vacuumMs = performance.now() - t1;
    const { rows: size } = await client.query(
      `SELECT pg_total_relation_size('cyclone_runs')::bigint AS runs, pg_total_relation_size('cyclone_steps')::bigint AS steps`,
    );
    return { rows, insertMs, vacuumMs, runsBytes: Number(size[0].runs), stepsBytes: Number(size[0].steps) };
  } finally {
    await client.end();
  }
}
