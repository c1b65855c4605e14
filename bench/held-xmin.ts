/**
 * W12: a queue under held-back vacuum. Jobs are produced at a steady rate
 * (each system's bulk insert, every 10 ms: single enqueues at 1,000 a second
 * are more than some peers' enqueue path does on two cores, W2) and run by
 * workers of the same process for a fixed time, once with
 * nothing holding the database's xmin and once with a REPEATABLE READ
 * transaction opened (its snapshot taken) at the start and held to the end,
 * as a long report, a replica's feedback or a slow backup would: no dead row
 * written after it began can be removed until it ends. Cyclone runs it a
 * third time, held, with `retention: 0`. Reported: throughput and the wait
 * from the enqueue call to the handler's first line in windows over the run,
 * and at the end the dead rows and the sizes of the tables and indexes.
 */
import pg from 'pg';
import { percentile } from './lib/stats.js';
import { sleep, type ChildContext } from './workloads.js';
import { cyclonePoolSize, type JobHandler, type Runner, type SystemName } from './runners/types.js';

export type HeldXminMode = 'free' | 'held' | 'held-retention-0';

export interface HeldXminParams {
  ratePerSec: number;
  seconds: number;
  workers: number;
  windowSeconds: number;
}

export interface HeldXminWindow {
  fromS: number;
  jobsPerSec: number;
  p50Ms: number;
  p99Ms: number;
}

export interface HeldXminResult {
  system: SystemName;
  mode: HeldXminMode;
  params: HeldXminParams;
  ok: boolean;
  error?: string;
  config: string;
  enqueued: number;
  handled: number;
  windows: HeldXminWindow[];
  /** Over the whole run. */
  p50Ms: number;
  p99Ms: number;
  /** At the end, over every table of the run's database. */
  deadRows: number;
  liveRows: number;
  tablesMb: number;
  indexesMb: number;
}

const wallNow = () => performance.timeOrigin + performance.now();

const TABLE_STATS = /* sql */ `
SELECT coalesce(sum(n_dead_tup), 0)::bigint AS dead, coalesce(sum(n_live_tup), 0)::bigint AS live,
       coalesce(sum(pg_table_size(relid)), 0)::float8 / 1048576 AS tables_mb,
       coalesce(sum(pg_indexes_size(relid)), 0)::float8 / 1048576 AS indexes_mb
  FROM pg_stat_user_tables`;

/** Child: one mode of W12 for one system on a fresh database. */
export async function heldXmin(runner: Runner, ctx: ChildContext, mode: HeldXminMode, p: HeldXminParams): Promise<HeldXminResult> {
  const poolSize = cyclonePoolSize(p.workers);
  const holder = new pg.Client({ connectionString: ctx.url, application_name: 'bench-held-xmin' });
  await holder.connect();
  const starts: { sentAt: number; at: number }[] = [];
  const handler: JobHandler = (payload) => {
    if (payload.sentAt !== undefined) starts.push({ sentAt: payload.sentAt, at: wallNow() });
  };
  const handle = await runner.start({
    url: ctx.url,
    workers: p.workers,
    poolSize,
    handler,
    ...(mode === 'held-retention-0' ? { retention: 0 as const } : {}),
  });
  try {
    if (mode !== 'free') {
      // The snapshot is taken by the first statement, not by BEGIN.
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query('SELECT count(*) FROM pg_class');
    }
    // A steady rate: every 10 ms the jobs due by then, in one bulk insert; one insert at a time.
    const t0 = wallNow();
    const end = t0 + p.seconds * 1_000;
    let enqueued = 0;
    while (wallNow() < end) {
      const due = Math.floor(((wallNow() - t0) / 1_000) * p.ratePerSec);
      if (due > enqueued) {
        const sentAt = wallNow();
        await handle.enqueueMany(Array.from({ length: due - enqueued }, (_, k) => ({ i: enqueued + k, sentAt })));
        enqueued = due;
      }
      await sleep(10);
    }
    // Until every job has started, or the workers have fallen a minute behind.
    const deadline = wallNow() + 60_000;
    while (starts.length < enqueued && wallNow() < deadline) await sleep(50);
    const stats = (await holder.query(TABLE_STATS)).rows[0];
    const windows: HeldXminWindow[] = [];
    for (let from = 0; from < p.seconds; from += p.windowSeconds) {
      const lo = t0 + from * 1_000;
      const hi = lo + p.windowSeconds * 1_000;
      const waits = starts.filter((s) => s.at >= lo && s.at < hi).map((s) => s.at - s.sentAt);
      windows.push({ fromS: from, jobsPerSec: waits.length / p.windowSeconds, p50Ms: percentile(waits, 50), p99Ms: percentile(waits, 99) });
    }
    const all = starts.map((s) => s.at - s.sentAt);
    return {
      system: runner.system,
      mode,
      params: p,
      ok: starts.length >= enqueued,
      ...(starts.length < enqueued ? { error: `${enqueued - starts.length} of ${enqueued} jobs had not started a minute after the last send` } : {}),
      config: runner.describe(p.workers, poolSize),
      enqueued,
      handled: starts.length,
      windows,
      p50Ms: percentile(all, 50),
      p99Ms: percentile(all, 99),
      deadRows: Number(stats.dead),
      liveRows: Number(stats.live),
      tablesMb: Number(stats.tables_mb),
      indexesMb: Number(stats.indexes_mb),
    };
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    await holder.end();
    await handle.stop();
  }
}
