-- Restores cyclone_claim_steps as version 5 defined it: one scan in claim order.
CREATE OR REPLACE FUNCTION cyclone_claim_steps(p_queue text, p_kinds text[], p_limit integer, p_owner text,
                                               p_lease_ttl_ms bigint)
RETURNS TABLE (id bigint, run_id uuid, node_id text, kind text, attempt integer, max_attempts integer,
               reclaims integer, lease_generation bigint, timeout_ms bigint, input jsonb, upstream jsonb,
               trace_context jsonb, wait_ms float8)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH picked AS (
    SELECT c.run_id, c.id FROM cyclone_steps c
     WHERE c.state = 'available' AND c.flow_key IS NULL AND c.queue = p_queue AND c.kind = ANY (p_kinds)
       AND c.scheduled_at <= now()
       AND NOT EXISTS (SELECT 1 FROM cyclone_paused_queues p WHERE p.queue = p_queue)
     ORDER BY c.priority DESC, c.scheduled_at, c.id
     LIMIT p_limit
     FOR UPDATE SKIP LOCKED
  )
  UPDATE cyclone_steps s
     SET state = 'running',
         lease_owner = p_owner,
         lease_generation = s.lease_generation + 1,
         lease_expiry = now() + p_lease_ttl_ms * interval '1 millisecond',
         started_at = now(),
         heartbeat_at = now(),
         progress = NULL,
         updated_at = now()
    FROM picked, cyclone_runs r
   WHERE s.run_id = picked.run_id AND s.id = picked.id AND r.id = s.run_id
  RETURNING s.id, s.run_id, s.node_id, s.kind, s.attempt, s.max_attempts, s.reclaims, s.lease_generation,
            (extract(epoch FROM s.timeout) * 1000)::bigint,
            r.input,
            CASE WHEN cardinality(s.depends_on) > 0 THEN
              (SELECT jsonb_object_agg(u.node_id, u.output) FROM cyclone_steps u
                WHERE u.run_id = s.run_id AND u.node_id = ANY (s.depends_on))
            END,
            r.trace_context,
            (extract(epoch FROM now() - s.scheduled_at) * 1000)::float8;
END $$;

DELETE FROM cyclone_schema_migrations WHERE version = 6;
