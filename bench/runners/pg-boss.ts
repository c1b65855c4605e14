import PgBoss from 'pg-boss';
import { JOB_KIND, type Runner, type StartOptions, type SystemHandle } from './types.js';

/** pg-boss's smallest allowed polling interval (attorney.js POLICY.MIN_POLLING_INTERVAL_MS). */
const POLLING_INTERVAL_SECONDS = 0.5;
/** Worker loops per process; each fetches a batch, runs it with Promise.all and completes it. */
const MAX_LOOPS = 5;
/** Crash test: an active job of a dead worker expires after this, and maintenance retries it. */
const CRASH_EXPIRE_SECONDS = 5;
const CRASH_MAINTENANCE_SECONDS = 1;

function shape(workers: number): { loops: number; batchSize: number } {
  const loops = Math.max(1, Math.min(MAX_LOOPS, workers));
  return { loops, batchSize: Math.ceil(workers / loops) };
}

async function start(options: StartOptions): Promise<SystemHandle> {
  const boss = new PgBoss({
    connectionString: options.url,
    max: options.poolSize,
    ...(options.crash ? { maintenanceIntervalSeconds: CRASH_MAINTENANCE_SECONDS } : {}),
  });
  boss.on('error', (err) => process.stderr.write(`[pg-boss] ${err.message}\n`));
  await boss.start();
  if (!(await boss.getQueue(JOB_KIND))) {
    await boss.createQueue(JOB_KIND, {
      name: JOB_KIND,
      ...(options.crash ? { expireInSeconds: CRASH_EXPIRE_SECONDS, retryLimit: 100, retryDelay: 0 } : {}),
    });
  }
  const handler = options.handler;
  if (options.workers > 0 && handler) {
    const { loops, batchSize } = shape(options.workers);
    for (let k = 0; k < loops; k++) {
      let id = '';
      id = await boss.work<any>(
        JOB_KIND,
        { batchSize, pollingIntervalSeconds: POLLING_INTERVAL_SECONDS, includeMetadata: true },
        async (jobs: PgBoss.JobWithMetadata<any>[]) => {
          await Promise.all(jobs.map((job) => handler(job.data, { runId: job.id, token: job.retryCount ?? 0 })));
          // A full batch means there is likely more: fetch again without waiting out the interval.
          if (jobs.length === batchSize) boss.notifyWorker(id);
        },
      );
    }
  }
  return {
    enqueue: async (payload) => {
      await boss.send(JOB_KIND, payload);
    },
    enqueueMany: async (payloads) => {
      await boss.insert(payloads.map((data) => ({ name: JOB_KIND, data })));
    },
    owner: () => null,
    stop: () => boss.stop({ graceful: true, wait: true, timeout: 10_000 }),
  };
}

export const runner: Runner = {
  system: 'pg-boss',
  flowControl: 'pg-boss 10 (the version installed here) has no group concurrency; pg-boss 12 does, not installed yet',
  describe: (workers, pool, crash) => {
    if (workers === 0) return `new PgBoss({ connectionString, max: ${pool} }); boss.send`;
    const { loops, batchSize } = shape(workers);
    return (
      `new PgBoss({ connectionString, max: ${pool}` +
      (crash ? `, maintenanceIntervalSeconds: ${CRASH_MAINTENANCE_SECONDS}` : '') +
      ` }); createQueue` +
      (crash ? `({ expireInSeconds: ${CRASH_EXPIRE_SECONDS}, retryLimit: 100, retryDelay: 0 })` : '') +
      `; ${loops} × boss.work({ batchSize: ${batchSize}, pollingIntervalSeconds: ${POLLING_INTERVAL_SECONDS}, includeMetadata: true }) ` +
      `= ${loops * batchSize} jobs in flight; each batch runs with Promise.all and calls boss.notifyWorker(id) when it was full ` +
      `(pg-boss 10 otherwise sleeps the polling interval after every fetch); no LISTEN/NOTIFY, so an idle worker finds a new job by polling; ` +
      `bulk seed with boss.insert`
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
  },
};
