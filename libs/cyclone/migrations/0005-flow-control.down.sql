-- Removes what 0005-flow-control.sql added, and restores the claim index,
-- cyclone_claim_steps and cyclone_start_workflow as they were before it.
DROP FUNCTION IF EXISTS cyclone_unique_conflict(text, text, boolean, jsonb, text, text, bigint);
DROP FUNCTION IF EXISTS cyclone_claim_flow(text, text[], boolean, boolean, integer, text, bigint, integer, integer,
                                           integer, integer, bigint, boolean, text);
DROP FUNCTION IF EXISTS cyclone_start_steps(uuid[], bigint[], text, bigint);
DROP FUNCTION IF EXISTS cyclone_rate_record(text[], bigint);
DROP FUNCTION IF EXISTS cyclone_rate_used(text, bigint);
DROP FUNCTION IF EXISTS cyclone_lock_flow(text);
DROP TABLE IF EXISTS cyclone_schedules;
DROP TABLE IF EXISTS cyclone_rate_buckets;

DROP INDEX IF EXISTS cyclone_steps_flow_running;
DROP INDEX IF EXISTS cyclone_steps_flow;
DROP INDEX IF EXISTS cyclone_steps_claim;
ALTER TABLE cyclone_steps DROP COLUMN IF EXISTS flow_key, DROP COLUMN IF EXISTS rate_key;
CREATE INDEX cyclone_steps_claim ON cyclone_steps (queue, priority DESC, scheduled_at, id)
  WHERE state = 'available';

-- cyclone_claim_steps of version 4: it claims every available step.
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
     WHERE c.state = 'available' AND c.queue = p_queue AND c.kind = ANY (p_kinds) AND c.scheduled_at <= now()
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

-- cyclone_start_workflow of version 4: nodes without flow keys.
CREATE OR REPLACE FUNCTION cyclone_start_workflow(p_run_id uuid, p_workflow text, p_graph jsonb, p_input jsonb,
                                                  p_queue text, p_unique_key text, p_retention_ms bigint,
                                                  p_nodes jsonb, p_trace_context jsonb)
RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
  IF p_unique_key IS NOT NULL THEN
    INSERT INTO cyclone_unique_keys (unique_key, run_id) VALUES (p_unique_key, p_run_id) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
      RETURN NULL;
    END IF;
  END IF;
  INSERT INTO cyclone_runs (id, workflow, graph, input, queue, unique_key, retention, trace_context)
  VALUES (p_run_id, p_workflow, p_graph, p_input, p_queue, p_unique_key, p_retention_ms * interval '1 millisecond',
          p_trace_context);

  INSERT INTO cyclone_steps (run_id, node_id, kind, node_type, queue, priority, state, depends_on,
                             max_attempts, max_reclaims, timeout, backoff_ms)
  SELECT p_run_id, n.node_id, n.kind, n.node_type, n.queue, n.priority, 'pending', n.depends_on,
         n.max_attempts, n.max_reclaims, n.timeout_ms * interval '1 millisecond', n.backoff_ms
    FROM jsonb_to_recordset(p_nodes) AS n(node_id text, kind text, node_type text, queue text, priority smallint,
                                         depends_on text[], max_attempts integer, max_reclaims integer,
                                         timeout_ms bigint, backoff_ms bigint[]);

  PERFORM cyclone_release_successors(ARRAY[p_run_id]);
  RETURN p_run_id;
END $$;

DELETE FROM cyclone_schema_migrations WHERE version = 5;
