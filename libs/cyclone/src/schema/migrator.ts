import type pg from 'pg';
import { SchemaError } from '../errors/schema.error.js';
import { messages } from '../cyclone.messages.js';
import { execute } from '../database/statement.js';
import { APPLIED_VERSIONS, HAS_SCHEMA, LOCK_MIGRATIONS } from '../sql/schema.sql.js';
import { schemaMigrations, type SchemaMigration } from './migrations.js';

/** What a database has of Cyclone's schema, against what this version ships. */
export interface MigrationPlan {
  applied: number[];
  pending: SchemaMigration[];
  /** Versions recorded in the database that this version does not ship: another version migrated it. */
  unknown: number[];
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
 */
export async function applyMigrations(client: pg.ClientBase): Promise<SchemaMigration[]> {
  await client.query('BEGIN');
  try {
    await execute(client, LOCK_MIGRATIONS, []);
    const plan = await planMigrations(client);
    if (plan.unknown.length > 0) throw new SchemaError(messages.schemaFromOtherVersion(plan.unknown));
    for (const migration of plan.pending) {
      try {
        await client.query(migration.up);
      } catch (err) {
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
 * check that none is pending (`'verify'`), or nothing (`false`).
 */
export async function migrateOnStartup(pool: pg.Pool, mode: boolean | 'verify'): Promise<SchemaMigration[]> {
  if (mode === false) return [];
  const client = await pool.connect();
  try {
    if (mode === true) return await applyMigrations(client);
    const plan = await planMigrations(client);
    if (plan.unknown.length > 0) throw new SchemaError(messages.schemaFromOtherVersion(plan.unknown));
    if (plan.pending.length > 0) throw new SchemaError(messages.schemaMissing(plan.pending.map((m) => m.version)));
    return [];
  } finally {
    client.release();
  }
}
