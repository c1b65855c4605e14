import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { schemaMigrations } from '../libs/cyclone/src/schema/migrations.js';
import type { OutageFailed, OutageProgress, OutageUncaught } from './crash/outage-app.js';
import { CREATE_CRASH_TABLES } from './crash/crash-steps.js';
import { OUTAGE_APP_SCRIPT, WorkerFleet, type WorkerProcess } from './crash/worker-fleet.js';
import { RestartablePostgres, type ShutdownMode } from './support/restartable-postgres.js';
import { sql } from './support/sql.js';
import { waitFor } from './support/wait.js';

/**
 * A restart of the database server must never crash the app: every pg client
 * and pool the library opens (its pool, the LISTEN connection, the
 * migrator's connection, a transaction of the app's through TypeORM) hears
 * the connection's end. The app runs in a process of its own whose
 * `uncaughtException` and `unhandledRejection` handlers report to this test
 * (test/crash/outage-app.ts), while a real PostgreSQL is stopped, fast and
 * immediate, and started again.
 */

const ROUNDS: ShutdownMode[] = ['fast', 'immediate', 'fast', 'immediate'];

let server: RestartablePostgres;
let fleet: WorkerFleet | undefined;

beforeAll(async () => {
  WorkerFleet.assertBuilt(OUTAGE_APP_SCRIPT);
  server = await RestartablePostgres.create();
});
afterEach(async () => {
  await fleet?.killAll();
  fleet = undefined;
  if (server && !server.isRunning) await server.start();
});
afterAll(() => server?.destroy());

/** A database of the test's own on the server, with the crash step's tables. */
async function freshDatabase(): Promise<string> {
  const name = `outage_${randomBytes(4).toString('hex')}`;
  await sql(server.url, `CREATE DATABASE ${name}`);
  const url = new URL(server.url);
  url.pathname = `/${name}`;
  await sql(url.toString(), CREATE_CRASH_TABLES);
  return url.toString();
}

/** The app in its process, and what it reports: its counters, what reached its handlers, a failed start. */
function startApp(databaseUrl: string) {
  fleet = new WorkerFleet({ databaseUrl, leaseTtlMs: 1_000, pollMs: [50, 200], slots: 4 }, OUTAGE_APP_SCRIPT);
  const app = fleet.spawn();
  const uncaught: OutageUncaught[] = [];
  const reports: { progress?: OutageProgress; failed?: OutageFailed } = {};
  app.child.on('message', (msg: OutageProgress | OutageUncaught | OutageFailed) => {
    if (msg.type === 'uncaught') uncaught.push(msg);
    else if (msg.type === 'progress') reports.progress = msg;
    else if (msg.type === 'failed') reports.failed = msg;
  });
  // Every wait below ends with the app's stacks as soon as anything reaches its handlers.
  const noneUncaught = () => {
    if (uncaught.length > 0) throw new Error(`the app raised:\n${uncaught.map((u) => `${u.source}: ${u.stack ?? u.message}`).join('\n')}`);
  };
  const now = (): OutageProgress => {
    noneUncaught();
    if (!reports.progress) throw new Error('the app has sent no progress yet');
    return reports.progress;
  };
  return { app, uncaught, reports, noneUncaught, now };
}

async function stopApp(app: WorkerProcess): Promise<void> {
  app.child.send({ type: 'stop' });
  await app.whenExited;
}

describe('a restart of the database server', () => {
  it('raises no uncaught exception and no unhandled rejection in a busy app, and the app carries on', async () => {
    const url = await freshDatabase();
    const { app, uncaught, reports, now } = startApp(url);
    await app.whenReady;
    await waitFor("the app's first progress report", () => reports.progress);
    const running = async () => (await sql(url, `SELECT count(*)::int AS n FROM cyclone_steps WHERE state = 'running'`))[0].n as number;

    for (const [round, mode] of ROUNDS.entries()) {
      // Stop it while the app is busy: steps running, enqueues going through, the LISTEN connection up.
      const enqueuedBefore = now().enqueued;
      await waitFor(
        `round ${round + 1}: the app to be busy`,
        async () => now().enqueued > enqueuedBefore + 3 && now().listenerConnected && (await running()) > 0,
        20_000,
      );
      await server.stop(mode);
      const down = now();
      // The app sees the outage: enqueues are refused and the health check says down.
      await waitFor(
        `round ${round + 1} (${mode}): the app to see the outage`,
        () => now().refused > down.refused && now().healthDown > down.healthDown && !now().listenerConnected,
        20_000,
      );
      await server.start();
      const up = now();
      // And carries on once the server is back.
      await waitFor(
        `round ${round + 1} (${mode}): the app to carry on after the restart`,
        () => now().enqueued > up.enqueued + 3 && now().healthUp > up.healthUp && now().reads > up.reads && now().listenerConnected,
        30_000,
      );
    }

    await stopApp(app);
    expect(uncaught).toEqual([]);
    expect(app.child.exitCode).toBe(0);
    // The outage was felt (what a restart does to the runs is database-restart's to check).
    const last = now();
    expect(last.refused).toBeGreaterThan(0);
    process.stderr.write(
      `\n[server-restart] ${ROUNDS.length} restarts (${ROUNDS.join(', ')}): ${last.enqueued} enqueues returned, ` +
        `${last.refused} refused, ${last.reads} read passes (${last.readFailures} failed), health ${last.healthUp} up / ` +
        `${last.healthDown} down; nothing uncaught\n`,
    );
  }, 240_000);

  it('while a startup migration waits between tries for a lock: the start fails with database_unavailable, nothing uncaught, and the next start migrates', async () => {
    const url = await freshDatabase();
    // The version before the last migration that locks the tables, as a deploy finds it.
    const migrations = schemaMigrations();
    const lastLocking = migrations.filter((m) => /^LOCK TABLE/m.test(m.up)).at(-1)!;
    for (const migration of migrations) await sql(url, migration.up);
    for (const migration of migrations.filter((m) => m.version >= lastLocking.version).reverse()) await sql(url, migration.down);
    // An app transaction holding the tables, so the migration lets go after its lock wait and pauses before trying again.
    const blocker = new pg.Client({ connectionString: url, application_name: 'cyclone-test' });
    blocker.on('error', () => undefined); // the restart below ends it; its transaction is over either way
    await blocker.connect();
    await blocker.query('BEGIN');
    await blocker.query('SELECT count(*) FROM cyclone_steps');

    const { app, uncaught, reports, noneUncaught } = startApp(url);
    app.whenReady.catch(() => undefined);
    // The migrator's connection sits idle between its tries: the moment a restart reaches it without a query to fail.
    await waitFor(
      'the startup migration to pause between tries',
      async () => {
        noneUncaught();
        const rows = await sql(
          url,
          `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'cyclone' AND state = 'idle' AND query = 'ROLLBACK'`,
        );
        return rows.length > 0;
      },
      30_000,
    );
    await server.stop('fast');
    await app.whenExited;
    expect(uncaught).toEqual([]);
    expect(reports.failed).toEqual({ type: 'failed', code: 'database_unavailable', message: expect.stringContaining('could not serve the call') });
    await blocker.end().catch(() => undefined);

    await server.start();
    const again = startApp(url);
    await again.app.whenReady;
    const [{ applied }] = await sql(url, 'SELECT max(version)::int AS applied FROM cyclone_schema_migrations');
    expect(applied).toBe(migrations.at(-1)!.version);
    await stopApp(again.app);
    expect(again.uncaught).toEqual([]);
  }, 120_000);
});
