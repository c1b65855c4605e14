import { EventEmitter } from 'node:events';
import { Logger, makeWorkerUtils, run, type WorkerEvents } from 'graphile-worker';
import { JOB_KIND, type BenchPayload, type Runner, type StartOptions, type SystemHandle } from '../runners/types.js';
import { peerVersion } from './version.js';

const VERSION = peerVersion('graphile-worker');

/** graphile-worker's documented fast configuration (worker.graphile.org/docs/performance). */
const LOCAL_QUEUE_SIZE = 500;
const COMPLETE_JOB_BATCH_DELAY = 0;
const FAIL_JOB_BATCH_DELAY = 0;

/** Errors only: graphile-worker logs every job at info level. */
const quiet = new Logger(() => (level, message) => {
  if (level === 'error') process.stderr.write(`[graphile-worker] ${message}\n`);
});

async function start(options: StartOptions): Promise<SystemHandle> {
  const utils = await makeWorkerUtils({ connectionString: options.url, maxPoolSize: options.poolSize, logger: quiet });
  await utils.migrate();
  const handler = options.handler;
  if (options.workers === 0 || !handler) {
    return {
      enqueue: async (payload) => {
        await utils.addJob(JOB_KIND, payload);
      },
      enqueueMany: async (payloads) => {
        await utils.addJobs(payloads.map((payload) => ({ identifier: JOB_KIND, payload })));
      },
      owner: () => null,
      stop: async () => {
        await utils.release();
      },
    };
  }
  // The producer side of a worker process uses the runner's own addJob (its pool).
  await utils.release();
  const events: WorkerEvents = new EventEmitter() as WorkerEvents;
  let poolId: string | null = null;
  events.on('pool:create', ({ workerPool }) => {
    poolId = workerPool.id;
  });
  const worker = await run({
    connectionString: options.url,
    concurrency: options.workers,
    maxPoolSize: options.poolSize,
    noHandleSignals: true,
    logger: quiet,
    events,
    taskList: {
      [JOB_KIND]: async (payload, helpers) => {
        await handler(payload as BenchPayload, { runId: String(helpers.job.id), token: helpers.job.attempts });
      },
    },
    preset: {
      worker: {
        localQueue: { size: LOCAL_QUEUE_SIZE },
        completeJobBatchDelay: COMPLETE_JOB_BATCH_DELAY,
        failJobBatchDelay: FAIL_JOB_BATCH_DELAY,
      },
    },
  });
  // The runner has no bulk add: W12's producer, beside the workers, gets utilities of its own when it first needs them.
  let bulk: Awaited<ReturnType<typeof makeWorkerUtils>> | undefined;
  return {
    enqueue: async (payload) => {
      await worker.addJob(JOB_KIND, payload);
    },
    enqueueMany: async (payloads) => {
      bulk ??= await makeWorkerUtils({ connectionString: options.url, maxPoolSize: 2, logger: quiet });
      await bulk.addJobs(payloads.map((payload) => ({ identifier: JOB_KIND, payload })));
    },
    owner: () => poolId,
    stop: async () => {
      await worker.stop();
      await bulk?.release();
    },
  };
}

export const runner: Runner = {
  system: 'graphile-worker',
  flowControl: `graphile-worker ${VERSION} has no per-key concurrency limit (a named queue runs one job at a time)`,
  describe: (workers, pool) =>
    workers === 0
      ? `graphile-worker ${VERSION}: makeWorkerUtils({ connectionString, maxPoolSize: ${pool} }); addJob, bulk addJobs`
      : `graphile-worker ${VERSION}: run({ concurrency: ${workers}, maxPoolSize: ${pool}, preset: { worker: { localQueue: { size: ${LOCAL_QUEUE_SIZE} }, ` +
        `completeJobBatchDelay: ${COMPLETE_JOB_BATCH_DELAY}, failJobBatchDelay: ${FAIL_JOB_BATCH_DELAY} } } }) ` +
        `(the batching options of its performance page; LISTEN/NOTIFY wake-ups, pollInterval 2 s default); ` +
        `runner.addJob for producers, bulk seed with workerUtils.addJobs`,
  start,
  pending: async (client) => {
    const { rows } = await client.query(`/* bench */ SELECT count(*)::int AS bench_n FROM graphile_worker._private_jobs`);
    return rows[0].bench_n;
  },
  completed: async (client, total) => {
    // Completed jobs are deleted; what is left is queued, locked or failed.
    const { rows } = await client.query(`/* bench */ SELECT count(*)::int AS bench_n FROM graphile_worker._private_jobs`);
    return total - rows[0].bench_n;
  },
  crash: {
    measurable:
      'a job locked by a dead worker stays locked until graphile-worker considers the lock stale, after a fixed 4 hours',
    held: async (client, owner) => {
      const { rows } = await client.query(
        `/* bench */ SELECT id::text AS bench_id FROM graphile_worker._private_jobs WHERE locked_by = $1`,
        [owner],
      );
      return rows.map((r) => r.bench_id);
    },
    freed: async (client, ids, owner) => {
      const { rows } = await client.query(
        `/* bench */ SELECT id::text AS bench_id FROM graphile_worker._private_jobs
          WHERE id = ANY ($1::bigint[]) AND locked_by IS DISTINCT FROM $2`,
        [ids, owner],
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
