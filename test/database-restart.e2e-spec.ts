import { afterAll, describe, expect, it } from '@jest/globals';
import { CycloneStats } from 'cyclone-nestjs';
import { WAKE_CHANNEL } from 'cyclone-nestjs';
import { CycloneHealthIndicator, CycloneHealthModule } from 'cyclone-nestjs/health';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { NotificationListener } from '../libs/cyclone/src/notifications/notification-listener.js';
import { CRASH_KIND, CREATE_CRASH_TABLES, CrashSteps, EFFECT_AT, type CrashInput } from './crash/crash-steps.js';
import { RestartablePostgres } from './support/restartable-postgres.js';
import { WorkerFleet } from './crash/worker-fleet.js';
import { sleep, waitFor } from './support/wait.js';

/**
 * SPEC §7: "Losing the database connection pauses claiming and resumes when it
 * comes back; no step is lost or run twice to completion." The server is
 * stopped mid-run for longer than the lease TTL and started again, with no
 * help from the test.
 */

const LEASE_TTL_MS = 1_000;
const DOWN_MS = 3_000;
/** In-process workers; a worker process with 2 more runs beside them. */
const WORKERS = 4;

let server: RestartablePostgres | undefined;
let env: CycloneTestEnv | undefined;
let fleet: WorkerFleet | undefined;
/** The job stream runs while this is true; a failing test must stop it too. */
let producing = false;

afterAll(async () => {
  producing = false;
  await fleet?.killAll();
  // The app drains over the database, so bring it back if a failure left it down.
  if (server && !server.isRunning) await server.start().catch(() => undefined);
  await env?.close().catch(() => undefined);
  await server?.destroy();
});

/** `eventually` with the description first, which reads better at the call sites below. */
const waitUntil = <T>(what: string, check: () => T | undefined | Promise<T | undefined>, timeoutMs: number): Promise<T> =>
  waitFor(what, async () => check(), timeoutMs);

/** Every fourth job is long: one of them can be caught running, its effect a lease TTL ahead, when the server stops. */
const LONG_JOB_MS = 2_500;
const job = (i: number): CrashInput => ({ i, ms: i % 4 === 3 ? LONG_JOB_MS : 200 + Math.floor(Math.random() * 1_000) });

describe('the database restarting mid-run', () => {
  it('pauses claiming and resumes by itself, the LISTEN connection comes back, nothing is lost and nothing completes twice', async () => {
    WorkerFleet.assertBuilt();
    server = await RestartablePostgres.create();
    env = await CycloneTestEnv.create({
      databaseUrl: server.url,
      isolate: false,
      providers: [CrashSteps],
      imports: [CycloneHealthModule],
      workers: WORKERS,
      leaseTtl: LEASE_TTL_MS,
      pollInterval: [50, 200],
      // The outage makes the library log warnings and errors by design; the counters below are the evidence.
      logger: false,
    });
    const e = env;
    await e.dataSource.query(CREATE_CRASH_TABLES);
    // Beside the in-process workers, a worker process: it must live through the outage on its own.
    fleet = new WorkerFleet({ databaseUrl: server.url, leaseTtlMs: LEASE_TTL_MS, pollMs: [50, 200], slots: 2 });
    const child = fleet.spawn();
    await child.whenReady;
    const stats = e.app.get(CycloneStats);
    const listener = e.app.get(NotificationListener);
    const indicator = e.app.get(CycloneHealthIndicator);
    let wakes = 0;
    listener.on(WAKE_CHANNEL, () => (wakes += 1));
    const progress = async () =>
      (
        await e.dataSource.query(
          `SELECT count(*) FILTER (WHERE state = 'completed')::int AS completed,
                  count(*) FILTER (WHERE state = 'running')::int AS running,
                  count(*)::int AS total FROM cyclone_steps`,
        )
      )[0] as { completed: number; running: number; total: number };

    // A stream of jobs, one every 150 ms (a little more than the workers keep up with), through the outage:
    // an enqueue that fails while the server is down never existed, the rest must all complete.
    const runIds: string[] = [];
    let enqueueFailures = 0;
    producing = true;
    const producer = (async () => {
      for (let i = 0; producing; i++) {
        try {
          runIds.push(await e.client.enqueue(CRASH_KIND, job(i)));
        } catch {
          enqueueFailures += 1;
        }
        await sleep(150);
      }
    })();
    // Stop the server while the stream is flowing: some jobs done, every worker slot busy, and one
    // handler a lease TTL from its effect write, so that its heartbeat (every TTL/3) fires in the
    // outage even if stopping the server takes a while on a busy machine.
    await waitUntil(
      'the stream to get going',
      async () => {
        const p = await progress();
        if (p.completed < 4 || p.running < WORKERS) return undefined;
        const [{ early }] = await e.dataSource.query(
          `SELECT count(*)::int AS early
             FROM cyclone_steps s
             JOIN cyclone_runs r ON r.id = s.run_id
             JOIN crash_invocations i ON i.run_id = s.run_id AND i.fencing_token = s.lease_generation
            WHERE s.state = 'running'
              AND i.started_at + (r.input->>'ms')::int * $1::float8 * interval '1 millisecond'
                  > clock_timestamp() + $2 * interval '1 millisecond'`,
          [EFFECT_AT, LEASE_TTL_MS],
        );
        return early > 0 ? p : undefined;
      },
      15_000,
    );
    const before = { ...stats };
    const stoppedAt = Date.now();
    await server.stop();

    // While it is down: the indicator says so, and an enqueue fails instead of hanging.
    const whileDown = await indicator.isHealthy('cyclone', { timeout: 1_000 });
    expect(whileDown.cyclone).toMatchObject({ status: 'down', database: 'unreachable' });
    const enqueueStarted = Date.now();
    await expect(e.client.enqueue(CRASH_KIND, { i: -1 })).rejects.toThrow();
    expect(Date.now() - enqueueStarted).toBeLessThan(5_000);
    // A busy handler heartbeats every TTL/3, so one heartbeat fails within a lease of the outage.
    await waitFor('a heartbeat to fail in the outage', () => (stats.heartbeatFailures > before.heartbeatFailures ? true : undefined), LEASE_TTL_MS * 2);
    // Down for longer than the lease TTL, several claims failing meanwhile.
    await waitFor(
      'an outage of several claims, longer than the lease',
      () => Date.now() - stoppedAt >= DOWN_MS && stats.claimFailures >= before.claimFailures + 3,
      DOWN_MS * 5,
    );
    const down = { ...stats };
    expect(listener.isConnected).toBe(false);
    // Claims and heartbeats kept failing (and were counted) rather than stopping the worker.
    expect(down.claimFailures).toBeGreaterThan(before.claimFailures);
    expect(down.heartbeatFailures).toBeGreaterThan(before.heartbeatFailures);

    await server.start();
    const upAt = Date.now();
    const downtimeMs = upAt - stoppedAt;

    // Claiming resumes by itself: a handler starts again.
    const firstClaimAt = await waitUntil(
      'a claim after the restart',
      async () => {
        const rows = await e.dataSource
          .query(`SELECT min(started_at) AS at FROM crash_invocations WHERE started_at > $1`, [new Date(upAt)])
          .catch(() => [{ at: null }]);
        const at = rows[0].at as Date | null;
        return at ? at.getTime() : undefined;
      },
      10_000,
    );
    // The LISTEN connection comes back by itself, here and in the worker process.
    await waitUntil('the LISTEN connection to come back', () => (listener.isConnected ? true : undefined), 10_000);
    const listenerBackMs = Date.now() - upAt;
    await waitUntil(
      "the worker process's LISTEN connection to come back too",
      async () => {
        const [{ listeners }] = await e.dataSource.query(
          `SELECT count(*)::int AS listeners FROM pg_stat_activity WHERE application_name = 'cyclone-listener'`,
        );
        return listeners === 2 ? true : undefined;
      },
      10_000,
    );

    // The stream goes on; its NOTIFYs arrive over the new connection.
    const wakesBefore = wakes;
    const enqueuedBefore = runIds.length;
    await waitFor('more jobs, and their wake-ups over the new connection', () => wakes >= wakesBefore + 3 && runIds.length >= enqueuedBefore + 5, 15_000);
    producing = false;
    await producer;
    expect(enqueueFailures).toBeGreaterThan(0);
    await waitUntil(
      'every run to finish',
      async () => {
        const [{ open }] = await e.dataSource.query(
          `SELECT count(*)::int AS open FROM cyclone_runs WHERE state NOT IN ('completed', 'failed', 'cancelled')`,
        );
        return open === 0 ? true : undefined;
      },
      30_000,
    );
    expect(wakes).toBeGreaterThan(wakesBefore);
    const after = { ...stats };
    // With the server back, the workers go on claiming (every poll tick) without a failure.
    await e.waitForPasses('cyclone:claim', 5);
    expect(stats.claimFailures).toBe(after.claimFailures);

    // Nothing lost: every run whose enqueue returned completed. (An enqueue cut off by the stop may
    // have committed without its caller hearing so; such a run must complete too.)
    const runs = (await e.dataSource.query(`SELECT id, state FROM cyclone_runs`)) as { id: string; state: string }[];
    const stored = new Set(runs.map((r) => r.id));
    expect(runIds.filter((id) => !stored.has(id))).toEqual([]);
    expect(runs.filter((r) => r.state !== 'completed')).toEqual([]);

    // Nothing completed twice: one effect per run, written by the holder whose completion counted.
    const steps = (await e.dataSource.query(`
      SELECT s.run_id, s.attempt, s.max_attempts, s.reclaims, s.lease_generation::int AS generation, s.output,
             e.fencing_token::int AS effect_token, e.pid AS effect_pid,
             (SELECT count(*)::int FROM crash_invocations i WHERE i.run_id = s.run_id AND i.started_at > s.finished_at) AS late
        FROM cyclone_steps s LEFT JOIN crash_effects e ON e.run_id = s.run_id`)) as {
      run_id: string;
      attempt: number;
      max_attempts: number;
      reclaims: number;
      generation: number;
      output: { token: number; pid: number; applied: boolean };
      effect_token: number | null;
      effect_pid: number | null;
      late: number;
    }[];
    expect(steps).toHaveLength(runs.length);
    const problems: string[] = [];
    for (const s of steps) {
      if (s.effect_token === null) problems.push(`run ${s.run_id}: no effect`);
      else if (s.effect_token !== s.output.token || s.output.token !== s.generation || !s.output.applied) {
        problems.push(`run ${s.run_id}: output ${JSON.stringify(s.output)}, effect ${s.effect_token}, generation ${s.generation}`);
      }
      if (s.attempt > s.max_attempts) problems.push(`run ${s.run_id}: attempt ${s.attempt} of ${s.max_attempts}`);
      if (s.late > 0) problems.push(`run ${s.run_id}: ${s.late} invocation(s) after it completed`);
    }
    expect(problems).toEqual([]);
    const [{ effects }] = await e.dataSource.query(`SELECT count(*)::int AS effects FROM crash_effects`);
    expect(effects).toBe(runs.length);

    // The health indicator is up again and its counters show what happened.
    const healthy = await waitUntil(
      'the indicator to report up',
      async () => {
        const result = await indicator.isHealthy('cyclone');
        return result.cyclone.status === 'up' ? result.cyclone : undefined;
      },
      10_000,
    );
    expect(healthy).toMatchObject({
      database: 'up',
      listener: 'connected',
      leases: { stranded: 0, heartbeatFailures: after.heartbeatFailures },
      worker: { claimFailures: after.claimFailures },
    });
    expect(after.heartbeatFailures).toBeGreaterThan(0);
    expect(after.claimFailures).toBeGreaterThan(0);

    // The worker process lived through it and took jobs again once the server was back.
    expect(child.exited).toBe(false);
    const [{ childClaims }] = await e.dataSource.query(
      `SELECT count(*)::int AS "childClaims" FROM crash_invocations WHERE pid = $1 AND started_at > $2`,
      [child.pid, new Date(upAt)],
    );
    expect(childClaims).toBeGreaterThan(0);

    const [totals] = await e.dataSource.query(`
      SELECT (SELECT count(*)::int FROM crash_invocations) AS invocations,
             (SELECT count(*)::int FROM crash_invocations WHERE effect = 'fenced') AS fenced,
             (SELECT sum(reclaims)::int FROM cyclone_steps) AS reclaims,
             (SELECT count(*)::int FROM cyclone_steps WHERE attempt > 1) AS retried`);
    process.stderr.write(
      `\n[db-restart] ${runs.length} jobs, ${WORKERS} workers, leaseTtl ${LEASE_TTL_MS} ms: server down ${downtimeMs} ms; ` +
        `first claim ${firstClaimAt - upAt} ms after it was back, LISTEN back after ${listenerBackMs} ms; ` +
        `${enqueueFailures} enqueues refused while down; worker process ${child.pid} alive, ${childClaims} jobs after; claimFailures ${after.claimFailures}, heartbeatFailures ${after.heartbeatFailures}, leasesLost ${after.leasesLost}; ` +
        `0 lost, 0 completed twice; ${totals.reclaims} reclaims, ${totals.retried} steps retried (attempt > 1), ` +
        `${totals.invocations - runs.length} extra invocations, ${totals.fenced} stale effect writes fenced\n`,
    );
  }, 60_000);
});
