-- Restores the claim, the start and completion of steps and the retry as
-- version 7 defined them, reading every month, and drops the claim's floor.
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
  v_runs     uuid[] := '{}';
  v_ids      bigint[] := '{}';
  v_left     integer := p_limit;
BEGIN
  IF EXISTS (SELECT 1 FROM cyclone_paused_queues p WHERE p.queue = p_queue) THEN
    RETURN;
  END IF;
  SELECT c.priority INTO v_priority FROM cyclone_steps c
   WHERE c.state = 'available' AND c.flow_key IS NULL AND c.queue = p_queue
   ORDER BY c.priority DESC LIMIT 1;
  -- The same order as one scan: priority, then due time, then age.
  WHILE v_priority IS NOT NULL LOOP
    SELECT v_runs || coalesce(array_agg(c.run_id), '{}'), v_ids || coalesce(array_agg(c.id), '{}')
      INTO v_runs, v_ids
      FROM (SELECT c.run_id, c.id FROM cyclone_steps c
             WHERE c.state = 'available' AND c.flow_key IS NULL AND c.queue = p_queue AND c.priority = v_priority
               AND c.kind = ANY (p_kinds) AND c.scheduled_at <= now()
             ORDER BY c.scheduled_at, c.id
             LIMIT v_left
               FOR UPDATE SKIP LOCKED) c;
    v_left := p_limit - cardinality(v_ids);
    EXIT WHEN v_left = 0;
    SELECT c.priority INTO v_priority FROM cyclone_steps c
     WHERE c.state = 'available' AND c.flow_key IS NULL AND c.queue = p_queue AND c.priority < v_priority
     ORDER BY c.priority DESC LIMIT 1;
  END LOOP;
  RETURN QUERY SELECT * FROM cyclone_start_steps(v_runs, v_ids, p_owner, p_lease_ttl_ms);
END $$;

CREATE OR REPLACE FUNCTION cyclone_start_steps(p_run_ids uuid[], p_ids bigint[], p_owner text, p_lease_ttl_ms bigint)
RETURNS TABLE (id bigint, run_id uuid, node_id text, kind text, attempt integer, max_attempts integer,
               reclaims integer, lease_generation bigint, timeout_ms bigint, input jsonb, upstream jsonb,
               trace_context jsonb, wait_ms float8)
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
  RETURN QUERY
  UPDATE cyclone_steps s
     SET state = 'running',
         lease_owner = p_owner,
         lease_generation = s.lease_generation + 1,
         lease_expiry = now() + p_lease_ttl_ms * interval '1 millisecond',
         started_at = now(),
         heartbeat_at = now(),
         progress = NULL,
         updated_at = now()
    FROM unnest(p_run_ids, p_ids) AS t(run_id, id), cyclone_runs r
   WHERE s.run_id = t.run_id AND s.id = t.id AND r.id = s.run_id
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

CREATE OR REPLACE FUNCTION cyclone_complete_steps(p_run_ids uuid[], p_ids bigint[], p_owner text,
                                                  p_generations bigint[], p_outputs jsonb[])
RETURNS TABLE (id bigint, generation bigint)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off
AS $$
#variable_conflict use_column
DECLARE
  v_runs   uuid[];
  v_ids    bigint[];
  v_gens   bigint[];
  v_done   uuid[];
  v_notify uuid[];
BEGIN
  -- The runs' locks first, in id order (cyclone_lock_runs, here so its plan is kept too).
  PERFORM 1 FROM cyclone_runs r WHERE r.id = ANY (p_run_ids) ORDER BY r.id FOR UPDATE;

  WITH completed AS (
    UPDATE cyclone_steps s
       SET state = 'completed', output = t.output, error = NULL, error_kind = NULL,
           finished_at = now(), updated_at = now(), lease_expiry = NULL
      FROM unnest(p_run_ids, p_ids, p_generations, p_outputs) AS t(run_id, id, generation, output)
     WHERE s.run_id = t.run_id AND s.id = t.id AND s.state = 'running'
       AND s.lease_owner = p_owner AND s.lease_generation = t.generation
       AND (s.timeout IS NULL OR s.started_at + s.timeout > now())
    RETURNING s.run_id, s.id, s.lease_generation
  )
  SELECT array_agg(c.run_id), array_agg(c.id), array_agg(c.lease_generation) INTO v_runs, v_ids, v_gens FROM completed c;
  IF v_runs IS NULL THEN
    RETURN;
  END IF;

  -- A standalone job's run completes with its one step: no routing, no
  -- counting of its steps. (A paused run may complete: nothing is left to hold.)
  WITH finished AS (
    UPDATE cyclone_runs r
       SET state = 'completed', updated_at = now(), finished_at = now(), delete_after = now() + r.retention
     WHERE r.id = ANY (v_runs) AND r.workflow IS NULL AND r.state IN ('running', 'paused')
    RETURNING r.id, r.notify_finish, r.unique_key
  ), freed AS (
    DELETE FROM cyclone_unique_keys k
     USING finished f
     WHERE f.unique_key IS NOT NULL AND k.unique_key = f.unique_key AND k.run_id = f.id
  )
  SELECT array_agg(f.id), array_agg(f.id) FILTER (WHERE f.notify_finish) INTO v_done, v_notify FROM finished f;
  PERFORM pg_notify('cyclone_run_finished', finished_id::text) FROM unnest(v_notify) AS finished_id;

  -- The rest are workflow runs: route below the completed nodes, then settle.
  v_runs := ARRAY(SELECT unnest(v_runs) EXCEPT SELECT unnest(v_done));
  IF cardinality(v_runs) > 0 THEN
    PERFORM cyclone_release_successors(v_runs);
    PERFORM cyclone_settle_runs(v_runs);
  END IF;
  RETURN QUERY SELECT * FROM unnest(v_ids, v_gens);
END $$;

CREATE OR REPLACE FUNCTION cyclone_retry_steps(p_run_id uuid, p_node_id text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
  v_count integer;
BEGIN
  SELECT state INTO v_state FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS NULL THEN
    RETURN -1;
  END IF;
  IF v_state = 'cancelled' THEN
    RETURN 0;
  END IF;

  UPDATE cyclone_steps
     SET state        = CASE WHEN v_state = 'paused' THEN 'paused' WHEN node_type = 'step' THEN 'available'
                             ELSE 'pending' END,
         paused_state = CASE WHEN v_state = 'paused' THEN
                          CASE WHEN node_type = 'step' THEN 'available' ELSE 'pending' END END,
         attempt      = CASE WHEN error_kind = 'reclaim_limit' THEN attempt ELSE attempt + 1 END,
         max_attempts = CASE WHEN error_kind = 'reclaim_limit' THEN attempt ELSE attempt + 1 END,
         reclaims     = CASE WHEN error_kind = 'reclaim_limit' THEN 0 ELSE reclaims END,
         error = NULL, error_kind = NULL, finished_at = NULL,
         scheduled_at = now(), updated_at = now()
   WHERE run_id = p_run_id AND state = 'discarded' AND (p_node_id IS NULL OR node_id = p_node_id);
  GET DIAGNOSTICS v_count = ROW_COUNT;

  IF v_count > 0 AND v_state = 'failed' THEN
    UPDATE cyclone_runs
       SET state = 'running', updated_at = now(), finished_at = NULL, delete_after = NULL
     WHERE id = p_run_id;
    -- The run is unfinished again and takes its unique key back: a unique
    -- violation when another run took it meanwhile, which undoes the retry.
    INSERT INTO cyclone_unique_keys (unique_key, run_id)
    SELECT unique_key, id FROM cyclone_runs WHERE id = p_run_id AND unique_key IS NOT NULL;
  END IF;
  IF v_count > 0 THEN
    PERFORM pg_notify('cyclone_wake', queue) FROM cyclone_runs WHERE id = p_run_id;
    -- A reopened signal wait waits again, with its full timeout.
    PERFORM cyclone_release_successors(ARRAY[p_run_id]);
  END IF;
  RETURN v_count;
END $$;

DROP FUNCTION IF EXISTS cyclone_lower_claim_floor(uuid);
DROP FUNCTION IF EXISTS cyclone_refresh_claim_floor();
DROP FUNCTION IF EXISTS cyclone_live_floor();
DROP FUNCTION IF EXISTS cyclone_lowest_id(uuid[]);
DROP FUNCTION IF EXISTS cyclone_run_month(uuid);
DROP TABLE IF EXISTS cyclone_claim_floor;

DELETE FROM cyclone_schema_migrations WHERE version = 8;
