import { statement } from '../database/statement.js';

/** A row returned by the claim: what a worker needs to run one attempt. */
export interface ClaimedStep {
  id: string;
  run_id: string;
  node_id: string;
  kind: string;
  attempt: number;
  max_attempts: number;
  reclaims: number;
  lease_generation: string;
  timeout_ms: string | null;
  input: unknown;
  upstream: Record<string, unknown> | null;
}

/**
 * The claim: one statement for as many steps as the worker has free slots.
 * SKIP LOCKED lets many workers claim side by side without waiting on each
 * other's rows. All times come from the database clock. The generation is
 * bumped so that every later write of this worker can compare-and-set on it.
 * Upstream outputs are read only for workflow nodes that have upstreams. A
 * paused queue (pauseQueue) claims nothing, on every client. Steps of kinds
 * with limits (flow_key set) are not this statement's: CLAIM_FLOW takes them.
 */
export const CLAIM_STEPS = statement<
  [queue: string, kinds: string[], limit: number, owner: string, leaseTtlMs: number],
  ClaimedStep
>(
  'cyclone_claim_steps',
  /* sql */ `
WITH picked AS (
  SELECT run_id, id FROM cyclone_steps
   WHERE state = 'available' AND flow_key IS NULL AND queue = $1 AND kind = ANY ($2::text[]) AND scheduled_at <= now()
     AND NOT EXISTS (SELECT 1 FROM cyclone_paused_queues p WHERE p.queue = $1)
   ORDER BY priority DESC, scheduled_at, id
   LIMIT $3
   FOR UPDATE SKIP LOCKED
)
UPDATE cyclone_steps s
   SET state = 'running',
       lease_owner = $4,
       lease_generation = s.lease_generation + 1,
       lease_expiry = now() + $5 * interval '1 millisecond',
       started_at = now(),
       heartbeat_at = now(),
       updated_at = now()
  FROM picked, cyclone_runs r
 WHERE s.run_id = picked.run_id AND s.id = picked.id AND r.id = s.run_id
RETURNING s.id, s.run_id, s.node_id, s.kind, s.attempt, s.max_attempts, s.reclaims, s.lease_generation,
          (extract(epoch FROM s.timeout) * 1000)::bigint AS timeout_ms,
          r.input,
          CASE WHEN cardinality(s.depends_on) > 0 THEN
            (SELECT jsonb_object_agg(u.node_id, u.output) FROM cyclone_steps u
              WHERE u.run_id = s.run_id AND u.node_id = ANY (s.depends_on))
          END AS upstream`,
  { prepared: true },
);

/** A row of CLAIM_FLOW: a started step, or (id null, last) the claim's status. */
export interface FlowClaimRow extends Omit<ClaimedStep, 'id'> {
  id: string | null;
  /** The last key served, where the kind's next claim goes on from. */
  next_cursor: string | null;
  /** Due work was left because a limit had no room. */
  held_back: boolean | null;
}

/**
 * A claim under flow control: one limited kind, or the kinds without limits
 * of a queue with a cluster-wide cap (sql/functions/claim-flow.sql).
 */
export const CLAIM_FLOW = statement<
  [
    queue: string,
    kinds: string[],
    limited: boolean,
    keyed: boolean,
    limit: number,
    owner: string,
    leaseTtlMs: number,
    queueCap: number | null,
    kindCap: number | null,
    keyCap: number | null,
    rateLimit: number | null,
    ratePerMs: number | null,
    rateKeyed: boolean,
    cursor: string | null,
  ],
  FlowClaimRow
>(
  'cyclone_claim_flow',
  /* sql */ `
SELECT * FROM cyclone_claim_flow($1, $2::text[], $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
  { prepared: true },
);
