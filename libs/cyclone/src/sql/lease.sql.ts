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
 * See cyclone_hand_back in the migrations: steps handed back at shutdown,
 * available at once with nothing counted. $1 step ids, $2 lease owner,
 * $3 generations (same order).
 */
export const HAND_BACK = /* sql */ `SELECT cyclone_hand_back($1::bigint[], $2, $3::bigint[]) AS handed`;
