import { statement } from '../database/statement.js';

/**
 * The advisory lock that serialises migrations, taken for the migrating
 * transaction only, so it cannot outlive its holder.
 */
export const LOCK_MIGRATIONS = statement<[]>(
  'cyclone_lock_migrations',
  /* sql */ `SELECT pg_advisory_xact_lock(7482001771)`,
);

/** Whether the first migration has run: it creates the table of versions. */
export const HAS_SCHEMA = statement<[], { present: boolean }>(
  'cyclone_has_schema',
  /* sql */ `SELECT to_regclass('cyclone_schema_migrations') IS NOT NULL AS present`,
);

/** Versions recorded as applied. */
export const APPLIED_VERSIONS = statement<[], { version: number; name: string; applied_at: Date }>(
  'cyclone_applied_versions',
  /* sql */ `SELECT version, name, applied_at FROM cyclone_schema_migrations ORDER BY version`,
);

/**
 * The migrating transaction's own limits: it gives up waiting for a table
 * lock after `lockTimeoutMs` (every statement on that table queues behind a
 * waiting ALTER, so a long wait would stall every worker), and its DDL may
 * run as long as it needs (Cyclone's connections have a statement_timeout).
 */
export const MIGRATION_LIMITS = statement<[lockTimeoutMs: string]>(
  'cyclone_migration_limits',
  /* sql */ `SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', '0', true)`,
);
