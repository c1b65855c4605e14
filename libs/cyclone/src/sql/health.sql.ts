import { statement } from '../database/statement.js';
import { AVAILABLE_STEPS } from './available-steps.sql.js';

/**
 * Running steps whose lease expired longer ago than the given time: a live
 * client's sweep should have reclaimed them by then.
 */
export const STRANDED_LEASES = statement<[olderThanMs: number], { stranded: number; oldest_ms: string | null }>(
  'cyclone_stranded_leases',
  /* sql */ `
SELECT count(*)::int AS stranded,
       (extract(epoch FROM now() - min(lease_expiry)) * 1000)::bigint AS oldest_ms
  FROM cyclone_steps
 WHERE lease_expiry IS NOT NULL AND state = 'running'
   AND lease_expiry < now() - $1 * interval '1 millisecond'`,
);

export interface QueueStateRow {
  queue: string;
  available: number;
  running: number;
  oldest_available_ms: string;
  paused: boolean;
}

/**
 * Per queue: due available steps, running steps, how long the oldest due step
 * has waited, and whether the queue is paused (pauseQueue). Read through the
 * partial indexes of available and running steps, never the history.
 */
export const QUEUE_STATE = statement<[], QueueStateRow>(
  'cyclone_queue_state',
  /* sql */ `
SELECT q.*, EXISTS (SELECT 1 FROM cyclone_paused_queues p WHERE p.queue = q.queue) AS paused
  FROM (SELECT queue,
               count(*) FILTER (WHERE state = 'available')::int AS available,
               count(*) FILTER (WHERE state = 'running')::int AS running,
               COALESCE((extract(epoch FROM now() - min(scheduled_at) FILTER (WHERE state = 'available')) * 1000)::bigint, 0)
                 AS oldest_available_ms
          FROM (SELECT queue, 'available' AS state, scheduled_at FROM ${AVAILABLE_STEPS} available
                 WHERE scheduled_at <= now()
                UNION ALL
                SELECT queue, 'running', scheduled_at FROM cyclone_steps
                 WHERE lease_expiry IS NOT NULL AND state = 'running') live
         GROUP BY queue) q
 ORDER BY queue`,
);
