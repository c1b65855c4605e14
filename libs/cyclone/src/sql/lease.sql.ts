import { statement } from '../database/statement.js';

/**
 * A heartbeat renews one step's lease, addressed by id. It matches nothing
 * once the step was completed, cancelled or reclaimed (the generation moved
 * on), or once its timeout elapsed on the database clock: then the worker
 * aborts the handler and the sweep takes the step from it.
 */
export const RENEW_LEASE = statement<[leaseTtlMs: number, runId: string, id: string, owner: string, generation: string]>(
  'cyclone_renew_lease',
  /* sql */ `
UPDATE cyclone_steps
   SET lease_expiry = now() + ($1::bigint * interval '1 millisecond'),
       heartbeat_at = now()
 WHERE run_id = $2 AND id = $3
   AND state = 'running'
   AND lease_owner = $4
   AND lease_generation = $5
   AND (timeout IS NULL OR started_at + timeout > now())`,
  { prepared: true },
);

/**
 * Stores a running step's progress (ctx.progress), fenced like a renewal:
 * it matches nothing once the step is not this attempt's any more.
 */
export const REPORT_PROGRESS = statement<
  [runId: string, id: string, owner: string, generation: string, progress: string]
>(
  'cyclone_report_progress',
  /* sql */ `
UPDATE cyclone_steps SET progress = $5::jsonb
 WHERE run_id = $1 AND id = $2 AND state = 'running' AND lease_owner = $3 AND lease_generation = $4`,
  { prepared: true },
);

/**
 * Why a renewal matched nothing: the step's state now, whether its timeout
 * elapsed, and, if the sweep already consumed the attempt, its attempt and
 * error kind.
 */
export const LEASE_LOSS_REASON = statement<
  [runId: string, id: string],
  { state: string; lease_generation: string; attempt: number; error_kind: string | null; timed_out: boolean }
>(
  'cyclone_lease_loss_reason',
  /* sql */ `
SELECT state, lease_generation, attempt, error_kind,
       (timeout IS NOT NULL AND started_at + timeout <= now()) AS timed_out
  FROM cyclone_steps WHERE run_id = $1 AND id = $2`,
);

/**
 * Steps handed back (at shutdown, or claimed ahead and not started in time),
 * available at once with nothing counted (sql/functions/hand-back.sql).
 * Arrays in the same order.
 */
export const HAND_BACK = statement<
  [runIds: string[], ids: string[], owner: string, generations: string[]],
  { handed: number }
>(
  'cyclone_hand_back',
  /* sql */ `SELECT cyclone_hand_back($1::uuid[], $2::bigint[], $3, $4::bigint[]) AS handed`,
);
