import { statement } from '../database/statement.js';
import { AVAILABLE_STEPS } from './available-steps.sql.js';

export interface QueueSampleRow {
  queue: string;
  available: number;
  scheduled: number;
  running: number;
  oldest_available_ms: string;
  paused: boolean;
}

/**
 * Per queue, across the cluster: available steps due now and due later,
 * running steps, how long the oldest due step has waited, and whether the
 * queue is paused (a paused queue with no steps is listed too). Each half of
 * the union reads partial indexes (AVAILABLE_STEPS, lease), so a sample
 * costs the size of the backlog, never of the history.
 */
export const QUEUE_SAMPLE = statement<[], QueueSampleRow>(
  'cyclone_queue_sample',
  /* sql */ `
WITH live AS (
  SELECT queue, 'available' AS state, scheduled_at FROM ${AVAILABLE_STEPS} available
  UNION ALL
  SELECT queue, state, scheduled_at FROM cyclone_steps WHERE lease_expiry IS NOT NULL AND state = 'running'
), counts AS (
  SELECT queue,
         count(*) FILTER (WHERE state = 'available' AND scheduled_at <= now())::int AS available,
         count(*) FILTER (WHERE state = 'available' AND scheduled_at > now())::int AS scheduled,
         count(*) FILTER (WHERE state = 'running')::int AS running,
         COALESCE((extract(epoch FROM now() - min(scheduled_at) FILTER (WHERE state = 'available' AND scheduled_at <= now()))
                   * 1000)::bigint, 0) AS oldest_available_ms
    FROM live GROUP BY queue
)
SELECT COALESCE(c.queue, p.queue) AS queue,
       COALESCE(c.available, 0) AS available, COALESCE(c.scheduled, 0) AS scheduled,
       COALESCE(c.running, 0) AS running, COALESCE(c.oldest_available_ms, 0) AS oldest_available_ms,
       p.queue IS NOT NULL AS paused
  FROM counts c FULL JOIN cyclone_paused_queues p ON p.queue = c.queue
 ORDER BY 1`,
);
