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
  /** The trace context the run was enqueued under, for the attempt's span; null without tracing. */
  trace_context: Record<string, string> | null;
  /** From when the step was due to this claim, on the database clock. */
  wait_ms: number;
}

/** A row of CLAIM_STEPS: a started step, or (id null, last) where the next claim reads each band from. */
export interface PlainClaimRow extends Omit<ClaimedStep, 'id'> {
  id: string | null;
  /** The bands read and not reached, highest first, and their floors (sql/functions/claim-bands.sql). */
  next_bands: number[] | null;
  next_floors: Date[] | null;
  /** The claim asked other clients to hand back steps they hold ahead (they keep their place, below the floors). */
  asked_back: boolean | null;
}

/**
 * The claim: as many steps as the worker has free slots, in one call, each
 * priority band read from the worker's floor for it
 * (sql/functions/claim-steps.sql). Steps of kinds with limits (flow_key
 * set) are not this statement's: CLAIM_FLOW takes them.
 */
export const CLAIM_STEPS = statement<
  [queue: string, kinds: string[], limit: number, owner: string, leaseTtlMs: number, bands: number[], floors: Date[]],
  PlainClaimRow
>(
  'cyclone_claim_steps_from',
  /* sql */ `SELECT * FROM cyclone_claim_steps_from($1, $2, $3, $4, $5, $6::smallint[], $7::timestamptz[])`,
  { prepared: true },
);

/** The claim of a schema before version 19, without floors: every band read from its start. */
export const CLAIM_STEPS_WITHOUT_FLOORS = statement<
  [queue: string, kinds: string[], limit: number, owner: string, leaseTtlMs: number],
  ClaimedStep
>(
  'cyclone_claim_steps',
  /* sql */ `SELECT id, run_id, node_id, kind, attempt, max_attempts, reclaims, lease_generation, timeout_ms, input, upstream,
         trace_context, wait_ms
  FROM cyclone_claim_steps($1, $2, $3, $4, $5)`,
  { prepared: true },
);

/** A look below a worker's floors: each band's floor, or the due time of a step found below it. */
export const CLAIM_FLOORS = statement<
  [queue: string, kinds: string[], bands: number[], floors: Date[]],
  { band: number; floor: Date }
>(
  'cyclone_claim_floors',
  /* sql */ `SELECT band, floor FROM cyclone_claim_floors($1, $2, $3::smallint[], $4::timestamptz[])`,
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
