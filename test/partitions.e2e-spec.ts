import { describe, it, expect, afterEach } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import pg from 'pg';
import { Step, defineWorkflow } from 'cyclone-nestjs';
import { CycloneHealthIndicator, CycloneHealthModule } from 'cyclone-nestjs/health';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { PartitionMaintainer } from '../libs/cyclone/src/maintenance/partition-maintainer.js';
import { RecoverySweeper } from '../libs/cyclone/src/maintenance/recovery.sweeper.js';
import { backendPid, sql, untilBlockedBy } from './support/sql.js';
import { lastTickAt, POLLING_OFF } from './support/handler-probe.js';
import { waitFor } from './support/wait.js';
import { claimReads, statementReads } from './support/statement-reads.js';

/**
 * Monthly partitions of runs and steps (SPEC §12): made ahead, dropped whole
 * once nothing in a month is live, kept (and reported) while something is,
 * with replicas calling the functions at the same moment.
 */

@Injectable()
class EchoSteps {
  @Step('echo')
  echo(input: unknown) {
    return input;
  }
}

/** Two steps, the second after the first: completing the first routes. */
const Pair = defineWorkflow<unknown>('pair').step('first', 'echo').step('second', 'echo', { after: ['first'] });

let envs: CycloneTestEnv[] = [];
afterEach(async () => {
  await Promise.all(envs.map((e) => e.close()));
  envs = [];
});

/**
 * An environment whose startup pass of the partition loop is over, so that
 * it cannot drop the old months a test makes before the test fills them.
 */
async function createEnv(options: Parameters<typeof CycloneTestEnv.create>[0] = {}): Promise<CycloneTestEnv> {
  const env = await CycloneTestEnv.create({ providers: [EchoSteps], ...options });
  envs.push(env);
  await waitFor('the startup pass of cyclone:partitions', () => lastTickAt(env, 'cyclone:partitions') !== null);
  return env;
}

/** `y2026m12` for a month `offset` months from now (UTC). */
function suffix(offset: number): string {
  const now = new Date();
  const month = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + offset, 1));
  return `y${month.getUTCFullYear()}m${String(month.getUTCMonth() + 1).padStart(2, '0')}`;
}

async function partitionsOf(env: CycloneTestEnv, parent: 'cyclone_runs' | 'cyclone_steps' | 'cyclone_attempts'): Promise<string[]> {
  const rows = await sql<{ name: string }>(
    env,
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = $1::regclass ORDER BY 1`,
    [parent],
  );
  return rows.map((r) => r.name);
}

/** A table's storage parameters (`autovacuum_vacuum_threshold=10000`, …), null when none is set. */
async function storageOptions(env: CycloneTestEnv, table: string): Promise<string[] | null> {
  const query = 'SELECT reloptions FROM pg_class WHERE oid = $1::regclass';
  const [row] = await sql<{ reloptions: string[] | null }>(env, query, [table]);
  return row.reloptions;
}

/**
 * Makes the partitions of a month long gone, as a system running since then
 * would have. Like cyclone_ensure_partitions, it gives way to the running
 * workers' statements (a short lock timeout, then again).
 */
async function makeOldMonth(env: CycloneTestEnv, year: number, month: number): Promise<string> {
  const name = `y${year}m${String(month).padStart(2, '0')}`;
  const from = `'${year}-${String(month).padStart(2, '0')}-01'::timestamp`;
  const bounds = `FROM (cyclone_month_floor(${from})) TO (cyclone_month_floor(${from} + interval '1 month'))`;
  const create = `SET lock_timeout = '100ms';
    CREATE TABLE cyclone_runs_${name} PARTITION OF cyclone_runs FOR VALUES ${bounds};
    CREATE TABLE cyclone_steps_${name} PARTITION OF cyclone_steps FOR VALUES ${bounds};
    CREATE TABLE cyclone_attempts_${name} PARTITION OF cyclone_attempts FOR VALUES ${bounds}`;
  await waitFor(`the partitions of ${name}`, () =>
    sql(env.databaseUrl, create).then(
      () => true,
      (err: { code?: string }) => {
        if (err.code === '55P03') return false;
        throw err;
      },
    ),
  );
  return name;
}

/** A month's partitions: its runs', its steps' and their attempts'. */
const monthTables = (month: string) => [`cyclone_runs_${month}`, `cyclone_steps_${month}`, `cyclone_attempts_${month}`];

/**
 * A run (and its one step) made in that month, in the given state; finished
 * runs carry a delete_after `deleteAfter` from now ('-1 day': past retention).
 */
async function oldRun(env: CycloneTestEnv, year: number, month: number, state: string, deleteAfter: string | null) {
  const at = `${year}-${String(month).padStart(2, '0')}-15`;
  const [{ id }] = await sql<{ id: string }>(
    env,
    `INSERT INTO cyclone_runs (id, kind, queue, retention, state, created_at, finished_at, delete_after)
     SELECT cyclone_month_floor('${at}'::timestamp + random() * interval '1 day'), 'echo', 'default', interval '1 day', $1,
            '${at}'::timestamptz, CASE WHEN $2::interval IS NOT NULL THEN '${at}'::timestamptz END, now() + $2::interval
     RETURNING id`,
    [state, deleteAfter],
  );
  await sql(
    env,
    `INSERT INTO cyclone_steps (run_id, node_id, kind, queue, state, max_attempts)
     VALUES ($1, 'echo', 'echo', 'default', $2, 5)`,
    [id, state === 'running' ? 'available' : 'completed'],
  );
  return id;
}

/** The first month the claim reads, as a partition suffix. */
const FLOOR_MONTH = `SELECT to_char(cyclone_run_month(low), '"y"YYYY"m"MM') AS month FROM cyclone_claim_floor`;

async function claimFloor(env: CycloneTestEnv): Promise<string> {
  const [floor] = await sql<{ month: string }>(env, FLOOR_MONTH);
  return floor.month;
}

/** A failed run of that month whose one step was discarded, as a retry finds it. */
async function oldFailedRun(env: CycloneTestEnv, year: number, month: number): Promise<string> {
  const id = await oldRun(env, year, month, 'failed', '1 day');
  await sql(
    env,
    `UPDATE cyclone_steps SET state = 'discarded', attempt = 5, error = 'boom', error_kind = 'error', finished_at = now()
      WHERE run_id = $1`,
    [id],
  );
  return id;
}

/** Runs `text` on `count` connections of their own at the same moment. */
async function atOnce<R extends pg.QueryResultRow>(url: string, count: number, text: string): Promise<R[][]> {
  const clients = await Promise.all(
    Array.from({ length: count }, async () => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      return client;
    }),
  );
  try {
    return await Promise.all(clients.map(async (c) => (await c.query<R>(text)).rows));
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }
}

describe('monthly partitions', () => {
  it('a migrated database has this month, the one before and three ahead; a run and its steps land in their month', async () => {
    const env = await createEnv();
    const months = [-1, 0, 1, 2, 3].map(suffix);
    expect(await partitionsOf(env, 'cyclone_runs')).toEqual(months.map((m) => `cyclone_runs_${m}`));
    expect(await partitionsOf(env, 'cyclone_steps')).toEqual(months.map((m) => `cyclone_steps_${m}`));
    expect(await partitionsOf(env, 'cyclone_attempts')).toEqual(months.map((m) => `cyclone_attempts_${m}`));

    const runId = await env.client.enqueue('echo', { hi: 1 });
    await env.runUntilComplete(runId);
    const [run] = await sql(env, 'SELECT tableoid::regclass::text AS partition FROM cyclone_runs WHERE id = $1', [runId]);
    const [step] = await sql(env, 'SELECT tableoid::regclass::text AS partition FROM cyclone_steps WHERE run_id = $1', [runId]);
    expect(run.partition).toBe(`cyclone_runs_${suffix(0)}`);
    expect(step.partition).toBe(`cyclone_steps_${suffix(0)}`);
  });

  it('monthsAhead makes more months ahead at startup; replicas ensuring at once create each month once', async () => {
    const env = await createEnv({ partitions: { monthsAhead: 6 } });
    expect(await partitionsOf(env, 'cyclone_runs')).toContain(`cyclone_runs_${suffix(6)}`);

    const created = await atOnce<{ n: number }>(env.databaseUrl, 4, 'SELECT cyclone_ensure_partitions(12) AS n');
    expect(created.map((rows) => rows[0].n).reduce((a, b) => a + b, 0)).toBe(6);
    expect(await partitionsOf(env, 'cyclone_runs')).toHaveLength(14);
    expect(await partitionsOf(env, 'cyclone_steps')).toHaveLength(14);
    expect(await partitionsOf(env, 'cyclone_attempts')).toHaveLength(14);
  });

  it('a month made before attempts were kept gets its attempts partition from the next ensure', async () => {
    const env = await createEnv();
    const month = await makeOldMonth(env, 2025, 5);
    await sql(env, `DROP TABLE cyclone_attempts_${month}`);
    await sql(env, 'SELECT cyclone_ensure_partitions(3)');
    expect(await partitionsOf(env, 'cyclone_attempts')).toContain(`cyclone_attempts_${month}`);
  });

  it('drops old months whose every run is finished and past retention; keeps and reports the others', async () => {
    const env = await createEnv({ partitions: { dropAfter: '30d' }, imports: [CycloneHealthModule] });
    const expired = await makeOldMonth(env, 2025, 1);
    const unfinished = await makeOldMonth(env, 2025, 2);
    const retained = await makeOldMonth(env, 2025, 3);
    const empty = await makeOldMonth(env, 2025, 4);
    await oldRun(env, 2025, 1, 'completed', '-1 day');
    await oldRun(env, 2025, 1, 'failed', '-1 day');
    const live = await oldRun(env, 2025, 2, 'running', null);
    await oldRun(env, 2025, 2, 'completed', '-1 day');
    await oldRun(env, 2025, 3, 'completed', '1 day');

    // A drop waits at most 100 ms for the tables' lock, behind the workers' statements; on a busy
    // machine a month can be left for the next pass, as the function says. Three passes at most.
    const dropped: string[] = [];
    let pass;
    let passes = 0;
    do {
      pass = await env.app.get(PartitionMaintainer).maintain();
      dropped.push(...pass.dropped);
    } while (dropped.length < 6 && ++passes < 3);
    expect(dropped.sort()).toEqual([expired, empty].flatMap(monthTables).sort());
    expect(pass.kept).toEqual([`cyclone_runs_${unfinished}`, `cyclone_runs_${retained}`]);
    const runs = await partitionsOf(env, 'cyclone_runs');
    expect(runs).toEqual(expect.arrayContaining([`cyclone_runs_${unfinished}`, `cyclone_runs_${retained}`, `cyclone_runs_${suffix(-1)}`]));
    expect(runs).not.toContain(`cyclone_runs_${expired}`);
    expect(await partitionsOf(env, 'cyclone_steps')).not.toContain(`cyclone_steps_${expired}`);
    // The kept month's live run is still there and still runs.
    expect((await env.runUntilComplete(live)).state).toBe('completed');
    // Health reports the kept months without calling the system unhealthy for them.
    const health = await env.app.get(CycloneHealthIndicator).isHealthy();
    expect((health.cyclone as any).partitions.kept).toEqual(pass.kept);
  });

  it('never drops the month before this one (clients with a slow clock write there), nor months younger than dropAfter', async () => {
    const env = await createEnv({ partitions: { dropAfter: '1000d' } });
    await makeOldMonth(env, 2025, 1);
    const pass = await env.app.get(PartitionMaintainer).maintain();
    expect(pass.dropped).toEqual([]);
    const [row] = await sql(env, `SELECT count(*)::int AS n FROM cyclone_drop_partitions(now())`);
    expect(row.n).toBe(3);
    expect(await partitionsOf(env, 'cyclone_runs')).toContain(`cyclone_runs_${suffix(-1)}`);
  });

  it('dropAfter: false drops nothing', async () => {
    const env = await createEnv({ partitions: { dropAfter: false } });
    const month = await makeOldMonth(env, 2025, 1);
    expect(await env.app.get(PartitionMaintainer).maintain()).toEqual({ created: 0, dropped: [], kept: [] });
    expect(await partitionsOf(env, 'cyclone_runs')).toContain(`cyclone_runs_${month}`);
  });

  it('replicas dropping at the same moment drop each month once, without an error', async () => {
    const env = await createEnv({ partitions: { dropAfter: false } });
    const months = [];
    for (let m = 1; m <= 6; m += 1) {
      months.push(await makeOldMonth(env, 2024, m));
      await oldRun(env, 2024, m, 'completed', '-1 day');
    }
    const dropped = (await atOnce<{ name: string }>(env.databaseUrl, 4, 'SELECT cyclone_drop_partitions(now()) AS name'))
      .flat()
      .map((r) => r.name);
    expect(dropped.sort()).toEqual(months.flatMap(monthTables).sort());
  });

  it('a month of steps that holds much history is vacuumed with its indexes: what claims leave does not slow later ones', async () => {
    const env = await createEnv();
    const month = `cyclone_steps_${suffix(0)}`;
    // Every month claimed from (this one, the one before, those ahead) starts autovacuum after a
    // fixed number of dead rows, not a fifth of its size.
    for (const name of await partitionsOf(env, 'cyclone_steps')) {
      expect(await storageOptions(env, name)).toEqual(
        expect.arrayContaining(['autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=10000', 'vacuum_index_cleanup=on']),
      );
    }
    // This month's history: 400,000 finished steps, in run id order as time makes them. Their
    // runs are left out: a claim reads steps alone, and it is the steps' month that is vacuumed.
    // On a connection of its own, without the statement timeout of Cyclone's pool.
    await sql(
      env.databaseUrl,
      `INSERT INTO cyclone_steps (run_id, node_id, kind, queue, state, attempt, max_attempts, started_at, finished_at,
                                  lease_owner, lease_generation, output)
       SELECT id, 'echo', 'echo', 'default', 'completed', 1, 5, now(), now(), 'history', 1, 'null'
         FROM (SELECT overlay(gen_random_uuid()::text PLACING left(cyclone_month_floor(now() AT TIME ZONE 'UTC')::text, 13) FROM 1)::uuid
                 FROM generate_series(1, 400000)
                ORDER BY 1) AS runs(id)`,
    );
    await sql(env, 'VACUUM cyclone_runs, cyclone_steps');
    // What a claim reads when nothing is due.
    const reads = () => claimReads(env.databaseUrl, 'echo', 50, 0);
    const clean = await reads();

    const ids = await env.client.enqueueMany('echo', Array.from({ length: 2_000 }, (_, i) => ({ i })));
    await waitFor(
      '2,000 jobs completed',
      async () => {
        const done = `SELECT count(*)::int AS n FROM cyclone_runs WHERE id = ANY ($1) AND state = 'completed'`;
        const [row] = await sql(env, done, [ids]);
        return row.n === ids.length;
      },
      60_000,
    );
    // Each claimed step left an entry at the head of the claim index, which a claim reads past.
    expect(await reads()).toBeGreaterThan(clean + 5);
    // A vacuum with the month's settings, as autovacuum runs it: the dead rows sit on too few of
    // the month's pages for a vacuum to clean the indexes by default; this month's settings make it.
    await sql(env, `VACUUM ${month}`);
    expect(await reads()).toBeLessThanOrEqual(clean + 3);
    // 400,000 rows written and vacuumed: minutes, not seconds, on a machine other jobs share.
  }, 180_000);

  it('an ended month of steps goes back to the server vacuum settings, unless someone changed them', async () => {
    const env = await createEnv({ partitions: { dropAfter: false } });
    const ended = await makeOldMonth(env, 2025, 1);
    const changed = await makeOldMonth(env, 2025, 2);
    for (const month of [ended, changed]) await sql(env, `SELECT cyclone_set_queue_vacuum('cyclone_steps_${month}', true)`);
    await sql(env, `ALTER TABLE cyclone_steps_${changed} SET (autovacuum_vacuum_threshold = 500)`);
    await env.app.get(PartitionMaintainer).maintain();
    const options = (month: string) => storageOptions(env, `cyclone_steps_${month}`);
    expect(await options(ended)).toBeNull();
    expect(await options(changed)).toContain('autovacuum_vacuum_threshold=500');
    for (const month of [-1, 0, 1].map(suffix)) expect(await options(month)).toContain('vacuum_index_cleanup=on');
  });

  it('a lookup by run id reads one month, whatever the history', async () => {
    const env = await createEnv();
    for (let m = 1; m <= 6; m += 1) await makeOldMonth(env, 2024, m);
    const runId = await env.client.enqueue('echo', {});
    await env.runUntilComplete(runId);
    const [explained] = await sql(
      env,
      `EXPLAIN (FORMAT JSON) SELECT state FROM cyclone_steps WHERE run_id = $1 AND node_id = 'echo'`,
      [runId],
    );
    const scanned = JSON.stringify(explained['QUERY PLAN']).match(/"Relation Name":"cyclone_steps_y\d+m\d+"/g) ?? [];
    expect(scanned).toEqual([`"Relation Name":"cyclone_steps_${suffix(0)}"`]);
  });
});

/**
 * The buffers one completion of the run's first step reads: claimed by a
 * probe and completed, ten times (plpgsql keeps its plans from the sixth call).
 */
function routingReads(url: string, runId: string): Promise<number> {
  return statementReads(url, 10, 1, async (client) => {
    const { rows } = await client.query<{ run_id: string; id: string; lease_generation: string }>(
      `SELECT run_id, id, lease_generation FROM cyclone_claim_steps('default', ARRAY['echo'], 1, 'probe', 30000)`,
    );
    expect(rows.map((r) => r.run_id)).toEqual([runId]);
    return [
      `SELECT * FROM cyclone_complete_steps(ARRAY[$1]::uuid[], ARRAY[$2]::bigint[], 'probe', ARRAY[$3]::bigint[], ARRAY['{}']::jsonb[])`,
      [rows[0].run_id, rows[0].id, rows[0].lease_generation],
    ];
  });
}

describe('the months the hot paths read', () => {
  it('a claim reads no more with months of history; a run written by hand in an old month is claimed from the next sweep on', async () => {
    const env = await createEnv({ partitions: { dropAfter: false } });
    await waitFor('the startup pass of cyclone:recovery', () => lastTickAt(env, 'cyclone:recovery') !== null);
    // From the month before this one: where new runs land, also from a clock a little behind.
    expect(await claimFloor(env)).toBe(suffix(-1));
    const fresh = await claimReads(env.databaseUrl, 'echo', 50, 0);
    for (let m = 1; m <= 6; m += 1) await makeOldMonth(env, 2024, m);
    expect(await claimReads(env.databaseUrl, 'echo', 50, 0)).toBe(fresh);

    const live = await oldRun(env, 2024, 3, 'running', null);
    expect((await env.runUntilComplete(live, { timeout: 10_000 })).state).toBe('completed');
    // Once nothing of that month is unfinished, the claim leaves it out again.
    await waitFor('the floor to rise again', async () => (await claimFloor(env)) === suffix(-1));
  });

  it("completing a workflow's step reads no more with months of history: its routing leaves them out too", async () => {
    const env = await createEnv({ workers: 0, workflows: [Pair], partitions: { dropAfter: false } });
    const runId = await env.client.start(Pair, {});
    const fresh = await routingReads(env.databaseUrl, runId);
    for (let m = 1; m <= 6; m += 1) await makeOldMonth(env, 2024, m);
    // A page pruned or a hint bit set between the two moves the count by a buffer or two; reading
    // the six months cost eight buffers each (135 against 87 before the routing was bounded).
    expect(await routingReads(env.databaseUrl, runId)).toBeLessThanOrEqual(fresh + 2);
  });

  it('a retry of an old failed run lowers the claim floor in its own transaction, and the run completes', async () => {
    const env = await createEnv({ partitions: { dropAfter: false }, pollInterval: POLLING_OFF });
    await waitFor('the startup pass of cyclone:recovery', () => lastTickAt(env, 'cyclone:recovery') !== null);
    await makeOldMonth(env, 2024, 2);
    const runId = await oldFailedRun(env, 2024, 2);
    await env.app.get(RecoverySweeper).sweep();
    expect(await claimFloor(env)).toBe(suffix(-1));

    const client = new pg.Client({ connectionString: env.databaseUrl });
    await client.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT cyclone_retry_steps($1, NULL)', [runId]);
      const { rows } = await client.query<{ month: string }>(FLOOR_MONTH);
      expect(rows[0].month).toBe('y2024m02');
      await client.query('COMMIT');
    } finally {
      await client.end();
    }
    expect((await env.runUntilComplete(runId, { timeout: 10_000 })).state).toBe('completed');
  });

  it('a sweep raising the floor while a retry commits keeps the retried run below it', async () => {
    const env = await createEnv({ partitions: { dropAfter: false }, pollInterval: POLLING_OFF });
    await waitFor('the startup pass of cyclone:recovery', () => lastTickAt(env, 'cyclone:recovery') !== null);
    await makeOldMonth(env, 2024, 5);
    const runId = await oldFailedRun(env, 2024, 5);
    // Lower than the unfinished runs need, as just after a run of an old month finished.
    await sql(env, `UPDATE cyclone_claim_floor SET low = '00000000-0000-0000-0000-000000000000'`);

    const retry = new pg.Client({ connectionString: env.databaseUrl });
    const sweep = new pg.Client({ connectionString: env.databaseUrl });
    await Promise.all([retry.connect(), sweep.connect()]);
    try {
      const [retryPid, sweepPid] = await Promise.all([retry, sweep].map(backendPid));
      await retry.query('BEGIN');
      await retry.query('SELECT cyclone_retry_steps($1, NULL)', [runId]);
      // The sweep does not see the retry yet, so it would raise the floor: it waits for the retry's lock.
      const refreshed = sweep.query('SELECT cyclone_refresh_claim_floor()');
      await untilBlockedBy(env, retryPid, sweepPid, "the sweep to wait for the retry's lock");
      await retry.query('COMMIT');
      await refreshed;
    } finally {
      await Promise.all([retry.end(), sweep.end()]);
    }
    expect(await claimFloor(env)).toBe('y2024m05');
    expect((await env.runUntilComplete(runId, { timeout: 10_000 })).state).toBe('completed');
  });
});
