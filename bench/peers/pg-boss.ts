import { PgBoss, type JobWithMetadata } from 'pg-boss';
import { JOB_KIND, type BenchPayload, type Runner, type StartOptions, type SystemHandle } from '../runners/types.js';
import { peerVersion } from './version.js';

const VERSION = peerVersion('pg-boss');
/** Fetch loops per process (work()'s localConcurrency); each fetches a batch and works it with its share of the workers. */
const LOOPS = 2;
/**
 * The backstop poll of a worker woken by NOTIFY (30 s by default). Jobs that no
 * NOTIFY announces, such as a dead worker's expired jobs put back for retry, wait
 * for it: 2 s, graphile-worker's poll interval.
 */
const NOTIFY_POLLING_INTERVAL_SECONDS = 2;
/** Crash test: an active job of a dead worker expires after this, and the monitor pass (every second) retries it. */
const CRASH_EXPIRE_SECONDS = 5;
const CRASH_SUPERVISE_SECONDS = 1;

/**
 * Loops and batch size for `workers` jobs in flight: a batch holds as many jobs
 * as its loop has workers, so no system runs more jobs at once than another
 * (pg-boss runs a batch in one handler call and completes it in one statement).
 */
function shape(workers: number): Shape {
  const loops = Math.max(1, Math.min(LOOPS, workers));
  return { loops, batchSize: Math.ceil(workers / loops) };
}

interface Shape {
  loops: number;
  batchSize: number;
}

/** The batch profile (PG_BOSS_BATCH): pg-boss tuned for throughput, whatever the worker count. */
const BATCH: Shape = { loops: 10, batchSize: 1_000 };

async function start(options: StartOptions, profile?: Shape): Promise<SystemHandle> {
  const boss = new PgBoss({
    connectionString: options.url,
    max: options.poolSize,
    // Workers of a queue with `notify` wake on its NOTIFY instead of waiting out their polling interval.
    useListenNotify: true,
    ...(options.crash ? { superviseIntervalSeconds: CRASH_SUPERVISE_SECONDS, monitorIntervalSeconds: CRASH_SUPERVISE_SECONDS } : {}),
  });
  boss.on('error', (err) => process.stderr.write(`[pg-boss] ${err.message}\n`));
  await boss.start();
  if (!(await boss.getQueue(JOB_KIND))) {
    await boss.createQueue(JOB_KIND, {
      notify: true,
      ...(options.crash ? { expireInSeconds: CRASH_EXPIRE_SECONDS, retryLimit: 100, retryDelay: 0 } : {}),
    });
  }
  const handler = options.handler;
  // W8: each job in the group of its key, at most perKey of a group active across all workers (groupConcurrency).
  const perKey = options.flow?.perKey;
  const group = (payload: BenchPayload) => (perKey === undefined ? {} : { group: { id: payload.key ?? '' } });
  if (options.workers > 0 && handler) {
    const { loops, batchSize } = profile ?? shape(options.workers);
    await boss.work(
      JOB_KIND,
      {
        localConcurrency: loops,
        batchSize,
        // A full batch means more is queued: fetch again at once instead of after the polling interval.
        burstWhenBatchFull: true,
        notifyPollingIntervalSeconds: NOTIFY_POLLING_INTERVAL_SECONDS,
        includeMetadata: true,
        ...(perKey === undefined ? {} : { groupConcurrency: perKey }),
      },
      async (jobs: JobWithMetadata<BenchPayload>[]) => {
        await Promise.all(jobs.map((job) => handler(job.data, { runId: job.id, token: job.retryCount })));
      },
    );
  }
  return {
    enqueue: async (payload) => {
      await boss.send(JOB_KIND, payload, group(payload));
    },
    enqueueMany: async (payloads) => {
      await boss.insert(JOB_KIND, payloads.map((data) => ({ data, ...group(data) })));
    },
    owner: () => null,
    stop: () => boss.stop({ graceful: true, timeout: 10_000 }),
  };
}

export const runner: Runner = {
  system: 'pg-boss',
  flowControl: true,
  describeFlow: (flow) => `send({ group: { id: input.key } }) and work({ groupConcurrency: ${flow.perKey} })`,
  describe: (workers, pool, crash) => {
    const setup =
      `pg-boss ${VERSION}: new PgBoss({ connectionString, max: ${pool}, useListenNotify: true` +
      (crash ? `, superviseIntervalSeconds: ${CRASH_SUPERVISE_SECONDS}, monitorIntervalSeconds: ${CRASH_SUPERVISE_SECONDS}` : '') +
      ` }); createQueue({ notify: true` +
      (crash ? `, expireInSeconds: ${CRASH_EXPIRE_SECONDS}, retryLimit: 100, retryDelay: 0` : '') +
      ' })';
    if (workers === 0) return `${setup}; boss.send (each send NOTIFYs), bulk boss.insert`;
    const { loops, batchSize } = shape(workers);
    return (
      `${setup}; boss.work({ localConcurrency: ${loops}, batchSize: ${batchSize}, burstWhenBatchFull: true, ` +
      `notifyPollingIntervalSeconds: ${NOTIFY_POLLING_INTERVAL_SECONDS}, includeMetadata: true }) = ${loops * batchSize} jobs in flight, ` +
      `each batch run with Promise.all and completed in one statement; NOTIFY wake-ups, polling as the backstop; ` +
      `boss.send for producers, bulk seed with boss.insert`
    );
  },
  start,
  pending: async (client) => {
    const { rows } = await client.query(
      `/* bench */ SELECT count(*)::int AS bench_n FROM pgboss.job WHERE name = $1 AND state < 'completed'`,
      [JOB_KIND],
    );
    return rows[0].bench_n;
  },
  completed: async (client) => {
    const { rows } = await client.query(
      `/* bench */ SELECT count(*)::int AS bench_n FROM pgboss.job WHERE name = $1 AND state = 'completed'`,
      [JOB_KIND],
    );
    return rows[0].bench_n;
  },
  crash: {
    measurable: true,
    // pg-boss records no owner on an active job: the jobs a process held are the active ones
    // whose latest handler invocation (bench_invocations) was in that process.
    held: async (client, _owner, pid) => {
      const { rows } = await client.query(
        `/* bench */ SELECT j.id::text AS bench_id FROM pgboss.job j
          WHERE j.name = $1 AND j.state = 'active'
            AND (SELECT i.pid FROM bench_invocations i WHERE i.run_id = j.id::text ORDER BY i.at DESC LIMIT 1) = $2`,
        [JOB_KIND, pid],
      );
      return rows.map((r) => r.bench_id);
    },
    freed: async (client, ids, _owner, killedAt) => {
      const { rows } = await client.query(
        `/* bench */ SELECT id::text AS bench_id FROM pgboss.job
          WHERE name = $1 AND id = ANY ($2::uuid[]) AND (state <> 'active' OR started_on > $3)`,
        [JOB_KIND, ids, killedAt],
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

/** pg-boss's batch profile, for W1 (see PG_BOSS_BATCH). */
export const batchRunner: Runner = {
  ...runner,
  system: 'pg-boss-batch',
  flowControl: 'the batch profile runs W1 only',
  describe: (workers, pool, crash) =>
    runner
      .describe(workers, pool, crash)
      .replace(/localConcurrency: \d+, batchSize: \d+/, `localConcurrency: ${BATCH.loops}, batchSize: ${BATCH.batchSize}`)
      .replace(/= \d+ jobs in flight/, `= up to ${BATCH.loops * BATCH.batchSize} jobs in flight`),
  start: (options) => start(options, BATCH),
};
