import type pg from 'pg';
import { SchemaError } from '../errors/schema.error.js';
import { messages } from '../cyclone.messages.js';
import type { CycloneDatabase } from '../database/cyclone-database.js';
import { isConnectionLost, settle } from '../database/database-fault.js';
import { execute } from '../database/statement.js';
import { APPLIED_VERSIONS, HAS_SCHEMA, LOCK_MIGRATIONS, MIGRATION_LIMITS } from '../sql/schema.sql.js';
import { schemaMigrations, type SchemaMigration } from './migrations.js';

/** What a database has of Cyclone's schema, against what this version ships. */
export interface MigrationPlan {
  applied: number[];
  pending: SchemaMigration[];
  /** Versions recorded in the database that this version does not ship: another version migrated it. */
  unknown: number[];
}

/**
 * How long a migration waits for a table lock before it lets go and tries
 * again. Below PostgreSQL's default deadlock_timeout (1 s), so that when a
 * worker and the migration wait on each other, the migration gives up
 * before the worker's deadlock check could pick the worker as the victim.
 */
export const MIGRATION_LOCK_TIMEOUT_MS = 500;
/** Tries before a migration that cannot get its locks fails: about two minutes. */
export const MIGRATION_LOCK_TRIES = 120;
/** SQLSTATE lock_not_available: lock_timeout ran out. */
const LOCK_NOT_AVAILABLE = '55P03';

export interface ApplyOptions {
  lockTimeoutMs?: number;
  tries?: number;
  /** Told of each try that had to let go of its locks, for the log. */
  onRetry?: (migration: string, attempt: number) => void;
}

export async function planMigrations(client: pg.ClientBase | pg.Pool): Promise<MigrationPlan> {
  const [{ present }] = (await execute(client, HAS_SCHEMA, [])).rows;
  const applied = present ? (await execute(client, APPLIED_VERSIONS, [])).rows.map((r) => r.version) : [];
  const all = schemaMigrations();
  const known = new Set(all.map((m) => m.version));
  return {
    applied,
    pending: all.filter((m) => !applied.includes(m.version)),
    unknown: applied.filter((v) => !known.has(v)),
  };
}

/**
 * Applies every pending migration in one transaction, under a transaction
 * advisory lock: replicas starting together take turns, each sees what the
 * one before it committed, and a process that dies mid-way leaves neither a
 * half-applied schema nor a held lock. Returns what it applied.
 *
 * Workers of the previous version keep running meanwhile. A DDL statement
 * waiting for its table's lock makes every later statement on that table
 * queue behind it, so a migration stuck behind a long transaction (an app's
 * enqueueTx in a slow business transaction) would stall every claim and
 * heartbeat. So it waits at most MIGRATION_LOCK_TIMEOUT_MS, then rolls back,
 * lets the queue drain for a moment and tries again.
 */
export async function applyMigrations(client: pg.ClientBase, options: ApplyOptions = {}): Promise<SchemaMigration[]> {
  const lockTimeoutMs = options.lockTimeoutMs ?? MIGRATION_LOCK_TIMEOUT_MS;
  const tries = options.tries ?? MIGRATION_LOCK_TRIES;
  for (let attempt = 1; ; attempt++) {
    try {
      return await applyOnce(client, lockTimeoutMs);
    } catch (err) {
      const blocked = err instanceof BlockedMigration ? err : undefined;
      if (!blocked) throw err;
      if (attempt >= tries) throw new SchemaError(messages.migrationLocked(blocked.migration, tries), blocked.lockError);
      options.onRetry?.(blocked.migration, attempt);
      // A pause of about the lock timeout, jittered so replicas do not retry in step.
      await new Promise((resolve) => setTimeout(resolve, lockTimeoutMs * (0.5 + Math.random())));
    }
  }
}

/** A migration that gave up waiting for a lock; it rolled back and may be tried again. */
class BlockedMigration extends Error {
  constructor(
    readonly migration: string,
    readonly lockError: unknown,
  ) {
    super(`migration ${migration} could not take its locks`);
  }
}

async function applyOnce(client: pg.ClientBase, lockTimeoutMs: number): Promise<SchemaMigration[]> {
  await client.query('BEGIN');
  try {
    // The advisory lock is waited for without a limit: it only makes replicas take turns.
    await execute(client, LOCK_MIGRATIONS, []);
    const plan = await planMigrations(client);
    if (plan.unknown.length > 0) throw new SchemaError(messages.schemaFromOtherVersion(plan.unknown));
    if (plan.pending.length > 0) await execute(client, MIGRATION_LIMITS, [`${lockTimeoutMs}ms`]);
    for (const migration of plan.pending) {
      try {
        await client.query(migration.up);
      } catch (err) {
        if ((err as { code?: unknown }).code === LOCK_NOT_AVAILABLE) throw new BlockedMigration(migration.name, err);
        // Not the migration's fault: the server went away under it (the caller says so).
        if (isConnectionLost(err)) throw err;
        throw new SchemaError(`Cyclone migration ${migration.name} failed: ${(err as Error).message}`, err);
      }
    }
    await client.query('COMMIT');
    return plan.pending;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/**
 * What the module does at startup: apply pending migrations (`true`), only
 * check that none is pending (`'verify'`), or nothing (`false`). The
 * connection is held across the pauses between tries, so it is lent by the
 * database, which hears it end; a server that goes away meanwhile fails the
 * start with DatabaseUnavailableError.
 */
export async function migrateOnStartup(
  database: CycloneDatabase,
  mode: boolean | 'verify',
  options: ApplyOptions = {},
): Promise<SchemaMigration[]> {
  if (mode === false) return [];
  const migrate = database.withConnection(async (client) => {
    if (mode === true) return applyMigrations(client, options);
    const plan = await planMigrations(client);
    if (plan.unknown.length > 0) throw new SchemaError(messages.schemaFromOtherVersion(plan.unknown));
    if (plan.pending.length > 0) throw new SchemaError(messages.schemaMissing(plan.pending.map((m) => m.version)));
    return [];
  });
  return settle(migrate, { where: database.where, statementTimeoutMs: database.statementTimeoutMs, runIds: null });
}
