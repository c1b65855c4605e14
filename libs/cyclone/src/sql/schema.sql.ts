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
