import { statement } from '../database/statement.js';

/**
 * Available steps of kinds that have no limits (any more) but carry a flow
 * key, for instance after a limit was removed from the code: they go back
 * to the plain claim.
 */
export const UNMARK_FLOW_STEPS = statement<[kinds: string[], limit: number]>(
  'cyclone_unmark_flow_steps',
  /* sql */ `
UPDATE cyclone_steps SET flow_key = NULL, rate_key = NULL, updated_at = now()
 WHERE (run_id, id) IN (SELECT run_id, id FROM cyclone_steps
                         WHERE state = 'available' AND flow_key IS NOT NULL AND kind = ANY ($1::text[])
                         LIMIT $2 FOR UPDATE SKIP LOCKED)`,
);

/**
 * Available steps of limited kinds that carry no flow key, for instance
 * enqueued before the limit was added to the code, with their run's input
 * to compute the key from.
 */
export const UNKEYED_FLOW_STEPS = statement<[kinds: string[], limit: number], { run_id: string; id: string; kind: string; input: unknown }>(
  'cyclone_unkeyed_flow_steps',
  /* sql */ `
SELECT s.run_id, s.id, s.kind, r.input
  FROM cyclone_steps s JOIN cyclone_runs r ON r.id = s.run_id
 WHERE s.state = 'available' AND s.flow_key IS NULL AND s.kind = ANY ($1::text[])
 LIMIT $2`,
);

/** Gives steps their flow and rate keys, if they are still available without one. */
export const SET_FLOW_KEYS = statement<[runIds: string[], ids: string[], flowKeys: string[], rateKeys: (string | null)[]]>(
  'cyclone_set_flow_keys',
  /* sql */ `
UPDATE cyclone_steps s SET flow_key = t.flow_key, rate_key = t.rate_key, updated_at = now()
  FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[]) AS t(run_id, id, flow_key, rate_key)
 WHERE s.run_id = t.run_id AND s.id = t.id AND s.state = 'available' AND s.flow_key IS NULL`,
);
