/** A row returned by the claim statement. */
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
