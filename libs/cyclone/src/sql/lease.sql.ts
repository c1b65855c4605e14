/**
 * A heartbeat renews one step's lease, addressed by id. It matches nothing once
 * the step was completed, cancelled or reclaimed (the generation moved on), or
 * once its timeout elapsed on the database clock: then the worker aborts the
 * handler and the sweep takes the step from it.
 *
 * $1 lease TTL ms, $2 step id, $3 lease owner, $4 lease generation.
 */
export const RENEW_LEASE = /* sql */ `
UPDATE cyclone_steps
   SET lease_expiry = now() + ($1::bigint * interval '1 millisecond'),
       heartbeat_at = now()
 WHERE id = $2
   AND state = 'running'
   AND lease_owner = $3
   AND lease_generation = $4
   AND (timeout IS NULL OR started_at + timeout > now())`;

/**
 * Why a renewal matched nothing: the step's state now, whether its timeout
 * elapsed, and, if the sweep already consumed the attempt, its attempt and error kind.
 */
export const LEASE_LOSS_REASON = /* sql */ `
SELECT state, lease_generation, attempt, error_kind,
       (timeout IS NOT NULL AND started_at + timeout <= now()) AS timed_out
  FROM cyclone_steps WHERE id = $1`;

/**
 * Hands steps back at shutdown: available at once, with neither an attempt nor
 * a reclaim counted, since nothing went wrong with them. Their queues' workers
 * on other clients are woken, as after a reclaim, so the steps do not wait for
 * a poll tick. Returns how many steps were handed back.
 *
 * $1 step ids, $2 lease owner, $3 generations (same order).
 */
export const HAND_BACK = /* sql */ `
WITH handed AS (
  UPDATE cyclone_steps s
     SET state = 'available', lease_owner = NULL, lease_expiry = NULL, updated_at = now()
    FROM unnest($1::bigint[], $3::bigint[]) AS t(id, generation)
   WHERE s.id = t.id AND s.state = 'running' AND s.lease_owner = $2 AND s.lease_generation = t.generation
  RETURNING s.queue
), woken AS (
  SELECT pg_notify('cyclone_wake', queue) FROM (SELECT DISTINCT queue FROM handed) q
)
SELECT (SELECT count(*) FROM handed)::int AS handed, (SELECT count(*) FROM woken)::int AS queues`;
