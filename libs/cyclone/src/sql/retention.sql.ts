import { statement } from '../database/statement.js';

/**
 * Deletes finished runs past their retention, their steps and their steps'
 * attempts, a bounded batch at a time; returns how many runs. SKIP LOCKED
 * lets replicas sweep together. (Whole months go faster, by cyclone_drop_partitions.)
 */
export const DELETE_EXPIRED_RUNS = statement<[batch: number], { runs: number }>(
  'cyclone_delete_expired_runs',
  /* sql */ `
WITH runs AS (
  DELETE FROM cyclone_runs
   WHERE id IN (SELECT id FROM cyclone_runs
                 WHERE delete_after IS NOT NULL AND delete_after <= now()
                 ORDER BY delete_after
                 LIMIT $1
                 FOR UPDATE SKIP LOCKED)
  RETURNING id
), steps AS (
  DELETE FROM cyclone_steps WHERE run_id IN (SELECT id FROM runs)
), attempts AS (
  DELETE FROM cyclone_attempts WHERE run_id IN (SELECT id FROM runs)
)
SELECT count(*)::int AS runs FROM runs`,
);

/** Rate-limit buckets that can no longer overlap a window (sql/functions/flow-locks.sql). */
export const DELETE_EXPIRED_RATE_BUCKETS = statement<[limit: number]>(
  'cyclone_delete_expired_rate_buckets',
  /* sql */ `
DELETE FROM cyclone_rate_buckets
 WHERE (scope, bucket) IN (SELECT scope, bucket FROM cyclone_rate_buckets WHERE expires_at < now()
                            ORDER BY expires_at LIMIT $1)`,
);
