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

/**
 * The claim: as many steps as the worker has free slots, in one call
 * (sql/functions/claim-steps.sql).
 */
export const CLAIM_STEPS = statement<
  [queue: string, kinds: string[], limit: number, owner: string, leaseTtlMs: number],
  ClaimedStep
>(
  'cyclone_claim_steps',
  /* sql */ `SELECT id, run_id, node_id, kind, attempt, max_attempts, reclaims, lease_generation, timeout_ms, input, upstream,
         trace_context, wait_ms
  FROM cyclone_claim_steps($1, $2, $3, $4, $5)`,
  { prepared: true },
);
