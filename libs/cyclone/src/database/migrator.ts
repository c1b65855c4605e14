import { Logger } from '@nestjs/common';
import { CYCLONE_MIGRATIONS } from '../../../../migrations/index.js';
import { SchemaError } from '../errors/schema.error.js';
import { messages } from '../cyclone.messages.js';
import type { CycloneDatabase } from './cyclone-database.js';

const logger = new Logger('Cyclone');

/**
 * Key of the advisory lock that serialises migrations: replicas starting
 * together take turns, and each sees what the one before it applied.
 */
const MIGRATION_LOCK_KEY = 7_482_001_771;

/**
 * Applies pending migrations (`true`), only checks that none is pending
 * (`'verify'`), or does nothing (`false`). Applied versions are recorded in
 * `cyclone_schema_migrations` whichever tool applied them.
 */
export async function migrate(database: CycloneDatabase, mode: boolean | 'verify'): Promise<void> {
  if (mode === false) return;
  if (mode === 'verify') {
    const missing = await pendingVersions(database);
    if (missing.length > 0) throw new SchemaError(messages.schemaMissing(missing));
    return;
  }
  const runner = database.dataSource.createQueryRunner('master');
  await runner.connect();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      const applied = await appliedVersions((sql) => runner.query(sql));
      for (const migration of CYCLONE_MIGRATIONS) {
        if (applied.has(migration.version)) continue;
        await runner.startTransaction();
        try {
          await new migration().up(runner);
          await runner.commitTransaction();
        } catch (err) {
          await runner.rollbackTransaction();
          throw new SchemaError(`Cyclone migration ${migration.name} failed: ${(err as Error).message}`, err);
        }
        logger.log(`Applied migration ${migration.name}`);
      }
    } finally {
      await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await runner.release();
  }
}

type Query = (sql: string) => Promise<unknown>;

async function pendingVersions(database: CycloneDatabase): Promise<number[]> {
  const applied = await appliedVersions(async (sql) => (await database.query(sql)).rows);
  return CYCLONE_MIGRATIONS.filter((m) => !applied.has(m.version)).map((m) => m.version);
}

async function appliedVersions(query: Query): Promise<Set<number>> {
  const [{ present }] = (await query(
    `SELECT to_regclass('cyclone_schema_migrations') IS NOT NULL AS present`,
  )) as { present: boolean }[];
  if (!present) return new Set();
  const rows = (await query('SELECT version FROM cyclone_schema_migrations')) as { version: number }[];
  return new Set(rows.map((r) => r.version));
}
