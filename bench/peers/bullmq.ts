import { Queue, Worker, createPostgresBackend, runMigrations, type Job } from 'bullmq';
import pg from 'pg';
import { JOB_KIND, type BenchPayload, type Runner, type StartOptions, type SystemHandle } from '../runners/types.js';
import { peerVersion } from './version.js';

const VERSION = peerVersion('bullmq');
/** BullMQ's default schema on PostgreSQL; a pool built by the caller must put it on its search_path. */
const SCHEMA = 'bullmq';
/** Crash test: a dead worker's lock runs out after this, and the stalled check (every second) puts its jobs back. */
const CRASH_LOCK_DURATION_MS = 5_000;
const CRASH_STALLED_INTERVAL_MS = 1_000;
/** Crash test: a job may stall this often before BullMQ fails it (the default, 1, would fail jobs whose worker was killed twice). */
const CRASH_MAX_STALLED = 100;

async function start(options: StartOptions): Promise<SystemHandle> {
  // One pool for the Queue and the Worker, so BullMQ has the connections the other systems have
  // (the Worker's LISTEN connection is one of them).
  const pool = new pg.Pool({ connectionString: options.url, max: options.poolSize, options: `-c search_path=${SCHEMA}` });
  pool.on('error', (err) => process.stderr.write(`[bullmq pool] ${err.message}\n`));
  // The guide's explicit migration step: idempotent, and serialised by an advisory lock.
  const client = await pool.connect();
  try {
    await runMigrations(client, SCHEMA);
  } finally {
    client.release();
  }
  // Completed jobs are deleted as they complete, the retention its PostgreSQL guide advises for
  // throughput ("large tables mean more index maintenance and vacuum work").
  const queue = new Queue(JOB_KIND, { connection: pool, defaultJobOptions: { removeOnComplete: true } }, createPostgresBackend);
  queue.on('error', (err) => process.stderr.write(`[bullmq queue] ${err.message}\n`));
  const handler = options.handler;
  const worker =
    options.workers > 0 && handler
      ? new Worker(
          JOB_KIND,
          async (job: Job<BenchPayload>) => {
            await handler(job.data, { runId: String(job.id), token: job.attemptsStarted });
          },
          {
            connection: pool,
            concurrency: options.workers,
            ...(options.crash
              ? { lockDuration: CRASH_LOCK_DURATION_MS, stalledInterval: CRASH_STALLED_INTERVAL_MS, maxStalledCount: CRASH_MAX_STALLED }
              : {}),
          },
          createPostgresBackend,
        )
      : undefined;
  if (worker) {
    worker.on('error', (err) => process.stderr.write(`[bullmq worker] ${err.message}\n`));
    await worker.waitUntilReady();
  }
  return {
    enqueue: async (payload) => {
      await queue.add(JOB_KIND, payload);
    },
    enqueueMany: async (payloads) => {
      await queue.addBulk(payloads.map((data) => ({ name: JOB_KIND, data })));
    },
    owner: () => worker?.id ?? null,
    stop: async () => {
      await worker?.close();
      await queue.close();
      await pool.end();
    },
  };
}

export const runner: Runner = {
  system: 'bullmq',
  flowControl: "BullMQ's groups (per-group concurrency) are in BullMQ Pro only, not in the open-source package",
  describe: (workers, pool, crash) =>
    `BullMQ ${VERSION} on PostgreSQL: one pg.Pool({ max: ${pool} }) for the Queue and the Worker (createPostgresBackend; ` +
    `the Worker's LISTEN connection is one of them), schema by runMigrations; ` +
    (workers === 0
      ? 'new Queue({ defaultJobOptions: { removeOnComplete: true } }); queue.add, bulk queue.addBulk'
      : `new Queue({ defaultJobOptions: { removeOnComplete: true } }), new Worker({ concurrency: ${workers}` +
        (crash
          ? `, lockDuration: ${CRASH_LOCK_DURATION_MS}, stalledInterval: ${CRASH_STALLED_INTERVAL_MS}, maxStalledCount: ${CRASH_MAX_STALLED}`
          : '') +
        ` }) (no batches in open-source BullMQ: each completion claims the worker's next job in the same transaction; ` +
        `LISTEN/NOTIFY wake-ups); queue.add for producers, bulk seed with queue.addBulk`),
  start,
  pending: async (client) => {
    const { rows } = await client.query(
      // One count per state, each over its partial index.
      `/* bench */ SELECT (SELECT count(*) FROM bullmq.job WHERE queue = $1 AND state = 'waiting')::int
                        + (SELECT count(*) FROM bullmq.job WHERE queue = $1 AND state = 'active')::int
                        + (SELECT count(*) FROM bullmq.job WHERE queue = $1 AND state = 'delayed')::int AS bench_n`,
      [JOB_KIND],
    );
    return rows[0].bench_n;
  },
  completed: async (client, total) => {
    // Completed jobs are deleted; what is left is queued, running or failed.
    const { rows } = await client.query(`/* bench */ SELECT count(*)::int AS bench_n FROM bullmq.job WHERE queue = $1`, [JOB_KIND]);
    return total - rows[0].bench_n;
  },
  crash: {
    measurable: true,
    // A job's lock token is the worker's id and a slot number.
    held: async (client, owner) => {
      const { rows } = await client.query(
        `/* bench */ SELECT id AS bench_id FROM bullmq.job WHERE queue = $1 AND state = 'active' AND lock_token LIKE $2 || ':%'`,
        [JOB_KIND, owner],
      );
      return rows.map((r) => r.bench_id);
    },
    // A job freed and then completed is gone (deleted on completion): freed is "no longer held by the dead worker".
    freed: async (client, ids, owner) => {
      const { rows } = await client.query(
        `/* bench */ SELECT x AS bench_id FROM unnest($2::text[]) AS x
          WHERE NOT EXISTS (SELECT 1 FROM bullmq.job j
                             WHERE j.queue = $1 AND j.id = x AND j.state = 'active' AND j.lock_token LIKE $3 || ':%')`,
        [JOB_KIND, ids, owner],
      );
      return rows.map((r) => r.bench_id);
    },
    // Its LISTEN runs on a connection of its pool; an idle backend shows its last statement.
    listeners: async (client) => {
      const { rows } = await client.query(
        `/* bench */ SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'`,
      );
      return rows.map((r) => r.pid);
    },
  },
};
