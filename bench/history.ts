/**
 * W6: history. Fills Cyclone's tables as a long-lived system's are, straight
 * with SQL: `rows` completed runs (one step each) spread evenly over `months`
 * monthly partitions (the current month and the ones before it), and
 * `waiting` runs whose step waits on a delay or a retry (available, due days
 * from now), then vacuums, analyses and checkpoints as autovacuum and the
 * checkpointer would have. W1, W2 and W3 then run on top of them; before
 * each, autovacuum is let catch up with the one before (autovacuumCaughtUp).
 */
import pg from 'pg';
import { runner } from './runners/cyclone.js';
import type { ChildContext } from './workloads.js';
import { totalBytesSql } from './lib/table-size.js';

const CHUNK = 250_000;

export async function seedHistory(
  ctx: ChildContext,
  rows: number,
  months = 7,
  waiting = 0,
): Promise<Record<string, number>> {
  // Boot once so the migrations create the schema and this month's partitions.
  const producer = await runner.start({ url: ctx.url, workers: 0, poolSize: 10 });
  await producer.stop();
  const client = new pg.Client({ connectionString: ctx.url });
  await client.connect();
  try {
    const t0 = performance.now();
    // The months before the ones Cyclone keeps ready, as they were made when they were current.
    for (let m = 2; m < months; m += 1) {
      await client.query(
        `SELECT format('CREATE TABLE IF NOT EXISTS %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', t || suffix, t,
                       cyclone_month_floor(start), cyclone_month_floor(start + interval '1 month'))
           FROM (SELECT date_trunc('month', now() AT TIME ZONE 'UTC') - make_interval(months => $1) AS start) s,
                LATERAL (SELECT to_char(start, '"_y"YYYY"m"MM') AS suffix) f,
                unnest(ARRAY['cyclone_runs', 'cyclone_steps']) AS t`,
        [m],
      ).then(async ({ rows: ddl }) => {
        for (const { format } of ddl) await client.query(format);
      });
    }
    // With the vacuum settings cyclone_ensure_partitions gives a month of steps when it makes
    // it (and takes back from the ended ones when Cyclone next starts).
    await client.query(
      `SELECT cyclone_set_queue_vacuum(i.inhrelid::regclass, true) FROM pg_inherits i WHERE i.inhparent = 'cyclone_steps'::regclass`,
    );
    // Finished runs, spread evenly from `months - 1` months ago to just now.
    const spanMs = (months - 1) * 30 * 86_400_000;
    for (let from = 1; from <= rows; from += CHUNK) {
      const to = Math.min(rows, from + CHUNK - 1);
      await client.query(
        `WITH runs AS (
           INSERT INTO cyclone_runs (id, kind, state, queue, input, retention, created_at, updated_at, finished_at, delete_after)
           -- Time-ordered ids, as Cyclone makes them, dated when each run was created (PostgreSQL 18's uuidv7).
           SELECT uuidv7(-(($3::float8 * ($2 - g) / $2) * interval '1 millisecond') - interval '1 minute'), 'bench_job', 'completed',
                  'default', jsonb_build_object('i', g), interval '400 days',
                  at, at, at, at + interval '400 days'
             FROM generate_series($1::int, $2::int) AS g,
                  LATERAL (SELECT now() - ($3::float8 * ($2 - g) / $2) * interval '1 millisecond' - interval '1 minute' AS at) t
           RETURNING id, created_at, finished_at)
         INSERT INTO cyclone_steps (run_id, node_id, kind, queue, state, attempt, max_attempts, scheduled_at, started_at,
                                    finished_at, heartbeat_at, lease_owner, lease_generation, output, created_at, updated_at)
         SELECT id, 'bench_job', 'bench_job', 'default', 'completed', 1, 5, created_at, created_at,
                finished_at, created_at, 'history', 1, 'null'::jsonb, created_at, finished_at
           FROM runs`,
        [from, to, spanMs],
      );
    }
    // Runs waiting on a delay (half) or on a retry after a failed attempt (half): due 1 to 30 days from now.
    for (let from = 1; from <= waiting; from += CHUNK) {
      const to = Math.min(waiting, from + CHUNK - 1);
      await client.query(
        `WITH runs AS (
           INSERT INTO cyclone_runs (id, kind, state, queue, input, retention)
           SELECT uuidv7(), 'bench_job', 'running', 'default', jsonb_build_object('w', g), interval '7 days'
             FROM generate_series($1::int, $2::int) AS g
           RETURNING id)
         INSERT INTO cyclone_steps (run_id, node_id, kind, queue, state, attempt, max_attempts, scheduled_at, error, error_kind)
         SELECT id, 'bench_job', 'bench_job', 'default', 'available', 1 + (n % 2), 5,
                now() + interval '1 day' + random() * interval '29 days',
                CASE WHEN n % 2 = 1 THEN 'retry after a failure' END, CASE WHEN n % 2 = 1 THEN 'error' END
           FROM (SELECT id, row_number() OVER () AS n FROM runs) r`,
        [from, to],
      );
    }
    const insertMs = performance.now() - t0;
    const t1 = performance.now();
    await client.query('VACUUM (ANALYZE) cyclone_runs, cyclone_steps');
    // A long-lived system has checkpointed its history long ago; without this,
    // the checkpoint the bulk load set off runs during the measurement.
    await client.query('CHECKPOINT');
    const vacuumMs = performance.now() - t1;
    const { rows: size } = await client.query(
      `SELECT ${totalBytesSql('cyclone_runs')} AS runs, ${totalBytesSql('cyclone_steps')} AS steps,
              (SELECT count(*) FROM pg_inherits WHERE inhparent = 'cyclone_runs'::regclass)::int AS partitions,
              (SELECT count(DISTINCT tableoid) FROM cyclone_runs WHERE state = 'completed')::int AS months`,
    );
    return {
      rows,
      waiting,
      months: Number(size[0].months),
      partitions: Number(size[0].partitions),
      insertMs,
      vacuumMs,
      runsBytes: Number(size[0].runs),
      stepsBytes: Number(size[0].steps),
    };
  } finally {
    await client.end();
  }
}

/**
 * Waits until autovacuum has nothing left to do on Cyclone's tables: no table
 * has more dead rows than its own trigger (its settings, else the server's:
 * threshold plus scale factor times its rows). A long-lived system runs each
 * workload after the previous one's dead rows were vacuumed, if its settings
 * start a vacuum for them at all; one launched within the server's
 * autovacuum_naptime. Returns the ms waited.
 */
export async function autovacuumCaughtUp(url: string, timeoutMs = 180_000): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const t0 = performance.now();
  try {
    for (;;) {
      const { rows } = await client.query<{ pending: number }>(
        `SELECT count(*)::int AS pending
           FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid,
                LATERAL (SELECT max(split_part(o, '=', 2)::float8) FILTER (WHERE o LIKE 'autovacuum_vacuum_threshold=%') AS threshold,
                                max(split_part(o, '=', 2)::float8) FILTER (WHERE o LIKE 'autovacuum_vacuum_scale_factor=%') AS scale
                           FROM unnest(coalesce(c.reloptions, '{}')) AS o) t
          WHERE s.relname LIKE 'cyclone\\_%'
            AND s.n_dead_tup > coalesce(t.threshold, current_setting('autovacuum_vacuum_threshold')::float8)
                               + coalesce(t.scale, current_setting('autovacuum_vacuum_scale_factor')::float8) * greatest(c.reltuples, 0)`,
      );
      if (rows[0].pending === 0) return performance.now() - t0;
      if (performance.now() - t0 > timeoutMs) throw new Error(`autovacuum did not catch up within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  } finally {
    await client.end();
  }
}
