import { statement } from '../database/statement.js';

/** Creates missing monthly partitions up to that many months ahead; returns how many months (sql/functions/partitions.sql). */
export const ENSURE_PARTITIONS = statement<[monthsAhead: number], { created: number }>(
  'cyclone_ensure_partitions',
  /* sql */ `SELECT cyclone_ensure_partitions($1) AS created`,
);

/** Drops the months that ended more than that long ago and hold nothing live; returns the dropped tables. */
export const DROP_PARTITIONS = statement<[olderThanMs: number], { name: string }>(
  'cyclone_drop_partitions',
  /* sql */ `SELECT name FROM cyclone_drop_partitions(now() - $1 * interval '1 millisecond') AS name`,
);

export interface PartitionRow {
  name: string;
  month: Date;
  ended_before: boolean;
  /** Null for months that have not ended long enough ago to be looked into. */
  live_runs: boolean | null;
  /** The planner's estimate, from the last analyse. */
  estimated_runs: number;
}

/** The months, oldest first; whether those ended that long ago still hold a live run. */
export const LIST_PARTITIONS = statement<[olderThanMs: number], PartitionRow>(
  'cyclone_list_partitions',
  /* sql */ `
SELECT p.name, p.month, p.ended_before, p.live_runs, greatest(c.reltuples, 0)::float8 AS estimated_runs
  FROM cyclone_partitions(now() - $1 * interval '1 millisecond') p
  JOIN pg_class c ON c.relname = p.name AND c.relnamespace = current_schema()::regnamespace
 ORDER BY p.month`,
);

/** Whether the schema is there at all (startup with migrationsRun: false may find none). */
export const HAS_RUNS_TABLE = statement<[], { present: boolean }>(
  'cyclone_has_runs_table',
  /* sql */ `SELECT to_regclass('cyclone_runs') IS NOT NULL AS present`,
);
