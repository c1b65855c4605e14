-- Restores cyclone_claim_steps as version 15 defined it: no NOTIFY for steps claimed ahead elsewhere.

CREATE OR REPLACE FUNCTION cyclone_claim_steps(p_queue text, p_kinds text[], p_limit integer, p_owner text,
                                               p_lease_ttl_ms bigint)
RETURNS TABLE (id bigint, run_id uuid, node_id text, kind text, attempt integer, max_attempts integer,
               reclaims integer, lease_generation bigint, timeout_ms bigint, input jsonb, upstream jsonb,
               trace_context jsonb, wait_ms float8)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off
AS $$
#variable_conflict use_column
DECLARE
  v_priority integer;
  v_low      uuid;
  v_paused   boolean;
  v_runs     uuid[] := '{}';
  v_ids      bigint[] := '{}';
  v_left     integer := p_limit;
BEGIN
  SELECT f.low, EXISTS (SELECT 1 FROM cyclone_paused_queues p WHERE p.queue = p_queue)
    INTO v_low, v_paused FROM cyclone_claim_floor f;
  IF v_paused THEN
    RETURN;
  END IF;
  SELECT c.priority INTO v_priority FROM cyclone_steps c
   WHERE c.state = 'available' AND c.flow_key IS NULL AND c.queue = p_queue
     AND c.run_id >= v_low
   ORDER BY c.priority DESC LIMIT 1;
  -- The same order as one scan: priority, then due time, then age.
  WHILE v_priority IS NOT NULL LOOP
    SELECT v_runs || coalesce(array_agg(c.run_id), '{}'), v_ids || coalesce(array_agg(c.id), '{}')
      INTO v_runs, v_ids
      FROM (SELECT c.run_id, c.id FROM cyclone_steps c
             WHERE c.state = 'available' AND c.flow_key IS NULL AND c.queue = p_queue AND c.priority = v_priority
               AND c.run_id >= v_low AND c.kind = ANY (p_kinds) AND c.scheduled_at <= now()
             ORDER BY c.scheduled_at, c.id
             LIMIT v_left
               FOR UPDATE SKIP LOCKED) c;
    v_left := p_limit - cardinality(v_ids);
    EXIT WHEN v_left = 0;
    SELECT c.priority INTO v_priority FROM cyclone_steps c
     WHERE c.state = 'available' AND c.flow_key IS NULL AND c.queue = p_queue AND c.priority < v_priority
       AND c.run_id >= v_low
     ORDER BY c.priority DESC LIMIT 1;
  END LOOP;
  IF cardinality(v_ids) = 0 THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT * FROM cyclone_start_steps(v_runs, v_ids, p_owner, p_lease_ttl_ms);
END $$;

DELETE FROM cyclone_schema_migrations WHERE version = 16;
