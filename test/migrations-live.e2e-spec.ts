import { afterEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { CYCLONE_MIGRATIONS } from 'cyclone-nestjs';
import { TestDatabase } from 'cyclone-nestjs/testing';
import { uuid7 } from '../libs/cyclone/src/common/uuid7.js';
import { applyMigrations, MIGRATION_LOCK_TIMEOUT_MS } from '../libs/cyclone/src/schema/migrator.js';
import { schemaMigrations, type SchemaMigration } from '../libs/cyclone/src/schema/migrations.js';
import { CRASH_KIND, CREATE_CRASH_TABLES, type CrashInput } from './crash/crash-steps.js';
import { WorkerFleet } from './crash/worker-fleet.js';
import { testServerUrl } from './support/nest-app-harness.js';
import { sql } from './support/sql.js';
import { sleep, waitFor } from './support/wait.js';

/**
 * The next migration applied while workers poll and claim (pg-boss#832: a
 * migration deadlocked against live workers). The database is at the
 * version before the last (all applied, the last one undone by its down),
 * and, when the last one only replaces functions, also at the version before
 * the last one that locks the tables (each undone in turn), so the lock
 * wait below is always exercised;
 * worker processes that do not migrate run on it, as with migrationsRun:
 * false and `cyclone migrate` run by hand after the deploy; jobs are written
 * as the previous version writes them, before and during the migration; and
 * an app transaction that enqueued a job stays open across the migration's
 * start, as a slow business transaction around enqueueTx would. A migration
 * that waited for that transaction's lock would queue every claim and
 * heartbeat behind it: the migrator gives up after MIGRATION_LOCK_TIMEOUT_MS
 * and tries again instead. Until it lands, the workers' statements that name
 * what it adds fail, and only those; once it has, none fails.
 */

/** Four times the migrator's lock wait: a heartbeat queued behind one attempt keeps its lease on a busy machine. */
const LEASE_TTL_MS = 2_000;
/** Longer than the lease: a worker stalled this long would lose its leases. */
const BLOCKER_MS = 3_000;

let fleet: WorkerFleet | undefined;
let database: TestDatabase | undefined;
afterEach(async () => {
  await fleet?.killAll();
  await database?.drop();
  fleet = database = undefined;
});

const locksTables = (m: SchemaMigration) => /^LOCK TABLE/m.test(m.up);

/** A job as the previous version inserts it: the baseline's columns only, and a UUIDv7 id (the key of its month's partition). */
const INSERT_JOB = /* sql */ `
WITH run AS (
  INSERT INTO cyclone_runs (id, kind, input, queue, retention)
  VALUES ($3::uuid, $1, $2::jsonb, 'default', interval '1 day')
  RETURNING id
)
INSERT INTO cyclone_steps (run_id, node_id, kind, queue, state, max_attempts)
SELECT id, $1, $1, 'default', 'available', 3 FROM run`;

const job = (i: number): CrashInput => ({ i, ms: 50 + (i % 5) * 30, failFirst: i % 7 === 0 });

const migrations = schemaMigrations();
const last = migrations[migrations.length - 1];
const lastLocking = migrations.filter(locksTables).at(-1)!;
/** The migrations pending in each case: the last one; and the last that locks the tables, with those after it. */
const cases = lastLocking === last ? [[last]] : [[last], migrations.filter((m) => m.version >= lastLocking.version)];

describe('the next migration against live workers of the previous version', () => {
  it.each(cases.map((pending) => [pending.map((m) => m.version).join(', '), pending] as const))(
    'applies (versions %s) without a deadlock, an error or a stall of the workers, and every job completes once',
    async (_versions, pending) => {
      WorkerFleet.assertBuilt();
      database = await TestDatabase.create(testServerUrl());
      const url = database.url;
      const admin = new pg.Client({ connectionString: url, application_name: 'cyclone-test' });
      await admin.connect();
      try {
        // The previous version's schema: every migration, then the pending ones undone, last first
        // (a down restores the functions it changed as the version before defined them).
        for (const migration of migrations) await admin.query(migration.up);
        for (const migration of [...pending].reverse()) await admin.query(migration.down);
        await admin.query(CREATE_CRASH_TABLES);
        for (let i = 0; i < 60; i++) await admin.query(INSERT_JOB, [CRASH_KIND, JSON.stringify(job(i)), uuid7()]);

        fleet = new WorkerFleet({ databaseUrl: url, leaseTtlMs: LEASE_TTL_MS, pollMs: [30, 100], slots: 4, reportPasses: true });
        const env = { CRASH_MIGRATIONS_RUN: 'false', CRASH_STATEMENT_TIMEOUT_MS: '2000' };
        const workers = [fleet.spawn(env), fleet.spawn(env)];
        await Promise.all(workers.map((w) => w.whenReady));
        await waitFor('the workers to be busy', async () => (await sql(url, 'SELECT count(*)::int AS n FROM crash_invocations'))[0].n > 10, 15_000);
        const [{ deadlocks: deadlocksBefore }] = await sql(url, 'SELECT deadlocks::int FROM pg_stat_database WHERE datname = current_database()');

        // Jobs keep coming, as the previous version writes them.
        let produced = 60;
        let producing = true;
        const producer = (async () => {
          while (producing) {
            await sql(url, INSERT_JOB, [CRASH_KIND, JSON.stringify(job(produced++)), uuid7()]);
            await sleep(40);
          }
        })();

        // An app transaction that enqueued a job and takes its time: it holds its lock on the tables throughout.
        const blocker = new pg.Client({ connectionString: url, application_name: 'cyclone-test' });
        await blocker.connect();
        await blocker.query('BEGIN');
        await blocker.query(INSERT_JOB, [CRASH_KIND, JSON.stringify(job(10_000)), uuid7()]);
        const released = sleep(BLOCKER_MS).then(async () => {
          await blocker.query('COMMIT');
          await blocker.end();
        });

        const migrationStarted = Date.now();
        let retries = 0;
        const applied = await applyMigrations(admin, { onRetry: () => (retries += 1) });
        const migrationMs = Date.now() - migrationStarted;
        // A statement a worker sent just before the commit fails on the old schema, and its log
        // line arrives a moment after the commit: the lines after the migration start once every
        // worker has gone round its claims and its sweep since.
        const live = fleet;
        await Promise.all(
          workers.flatMap((w) => [live.waitForPasses(w, 'cyclone:claim', 2), live.waitForPasses(w, 'cyclone:recovery', 1)]),
        );
        const migrated = fleet.mark();
        await released;
        // The workers run jobs written after the app's transaction ended, on the new schema.
        const producedAfter = produced;
        await waitFor(
          'jobs written after the migration to run',
          async () =>
            (await sql(url, `SELECT count(*)::int AS n FROM cyclone_runs WHERE state = 'completed' AND (input->>'i')::int >= $1`, [producedAfter]))[0]
              .n >= 5,
          15_000,
        );
        producing = false;
        await producer;

        expect(applied.map((m) => m.version)).toEqual(pending.map((m) => m.version));
        if (pending.some(locksTables)) {
          // It met the open transaction, let go and came back: it waited about as long as that transaction lasted.
          expect(retries).toBeGreaterThan(0);
          expect(migrationMs).toBeGreaterThanOrEqual(BLOCKER_MS - 2 * MIGRATION_LOCK_TIMEOUT_MS);
        } else {
          // Functions only: nothing of it waits for the app's transaction.
          expect(retries).toBe(0);
          expect(migrationMs).toBeLessThan(BLOCKER_MS);
        }

        const total = produced + 1;
        await waitFor(
          'every job to complete',
          async () => (await sql(url, `SELECT count(*)::int AS n FROM cyclone_runs WHERE state = 'completed'`))[0].n === total,
          30_000,
        );

        // No deadlock, and nothing the workers logged says a statement failed or waited too long: before the
        // migration landed, only statements naming a column, table or function it adds failed; after, none did.
        const [{ deadlocks }] = await sql(url, 'SELECT deadlocks::int FROM pg_stat_database WHERE datname = current_database()');
        expect(deadlocks - deadlocksBefore).toBe(0);
        const complaint = (line: string) =>
          /Claim on queue|Heartbeat of step|Could not record|failed: |statement timeout|deadlock|lease (was )?lost/i.test(line);
        const added = [...pending.map((m) => m.up).join('\n').matchAll(/ADD COLUMN (\w+)|CREATE TABLE (\w+)|FUNCTION (\w+)/g)].map(
          (m) => m[1] ?? m[2] ?? m[3],
        );
        const missingAdded = new RegExp(`(column|relation|function) "?(${added.join('|') || '$^'})"?(\\([^)]*\\))? does not exist`);
        const after = fleet.since(migrated);
        const kept = fleet.tail(200).split('\n');
        const before = kept.slice(0, kept.length - after.length);
        expect(before.filter((line) => complaint(line) && !missingAdded.test(line))).toEqual([]);
        expect(after.filter(complaint)).toEqual([]);
        expect(workers.every((w) => !w.exited)).toBe(true);

        // Nothing lost, nothing run twice: one effect per job, no lease expired (no reclaim), the retries retried once.
        const [counts] = await sql(
          url,
          `SELECT (SELECT count(*)::int FROM cyclone_runs) AS runs,
                  (SELECT count(*)::int FROM crash_effects) AS effects,
                  (SELECT coalesce(sum(reclaims), 0)::int FROM cyclone_steps) AS reclaims,
                  (SELECT count(*)::int FROM cyclone_steps WHERE attempt = 2) AS retried,
                  (SELECT count(*)::int FROM cyclone_steps WHERE attempt > 2) AS beyond`,
        );
        expect(counts).toMatchObject({ runs: total, effects: total, reclaims: 0, beyond: 0 });
        expect(counts.retried).toBe(Array.from({ length: total - 1 }, (_, i) => job(i)).filter((j) => j.failFirst).length);

        // The workers never stood still for long while jobs were due: no gap between claims near the blocker's length.
        const [{ gap_ms }] = await sql(
          url,
          `SELECT max(gap)::int AS gap_ms FROM (
             SELECT extract(epoch FROM started_at - lag(started_at) OVER (ORDER BY started_at)) * 1000 AS gap
               FROM crash_invocations WHERE started_at BETWEEN $1 AND $2) g`,
          // While the migration ran, and for as long as the app's transaction stayed open.
          [new Date(migrationStarted), new Date(migrationStarted + Math.max(migrationMs, BLOCKER_MS))],
        );
        process.stderr.write(
          `\n[live migration] ${pending.map((m) => m.name).join(', ')} applied in ${migrationMs} ms after ${retries} lock timeouts, beside 2 worker processes; ` +
            `${total} jobs, 0 deadlocks, longest gap between claims ${gap_ms} ms\n`,
        );
        expect(gap_ms).toBeLessThan(1_500);
        expect(CYCLONE_MIGRATIONS.map((m) => m.version)).toContain(last.version);
      } finally {
        await admin.end();
      }
    },
    90_000,
  );
});
