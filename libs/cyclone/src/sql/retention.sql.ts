import { statement } from '../database/statement.js';

/**
 * Deletes finished runs past their retention, their steps with them (ON
 * DELETE CASCADE), a bounded batch at a time. SKIP LOCKED lets replicas
 * sweep together.
 */
export const DELETE_EXPIRED_RUNS = statement<[batch: number]>(
  'cyclone_delete_expired_runs',
  /* sql */ `
DELETE FROM cyclone_runs
 WHERE id IN (SELECT id FROM cyclone_runs
               WHERE delete_after IS NOT NULL AND delete_after <= now()
               ORDER BY delete_after
               LIMIT $1
               FOR UPDATE SKIP LOCKED)`,
);
