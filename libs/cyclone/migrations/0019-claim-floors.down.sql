-- Restores the claims of version 18 (every band read from its start, no floors), its sweep's
-- look for the oldest unfinished run, and its completion.

CREATE OR REPLACE FUNCTION cyclone_claim_steps(p_queue text, p_kinds text[], p_limit integer, p_owner text,
                                               p_lease_ttl_ms bigint)
RETURNS TABLE (id bigint, run_id uuid, node_id text, kind text, attempt integer, max_attempts integer,
               reclaims integer, lease_generation bigint, timeout_ms bigint, input jsonb, upstream jsonb,
               trace_context jsonb, wait_ms float8)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET jit = off
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
  IF cardinality(v_ids) < p_limit AND EXISTS (
       SELECT 1 FROM cyclone_steps c
        WHERE c.lease_expiry > now() AND c.lease_expiry <= now() + interval '3 seconds'
          AND c.state = 'running' AND c.queue = p_queue AND c.lease_owner <> p_owner AND c.run_id >= v_low) THEN
    PERFORM pg_notify('cyclone_idle', p_queue);
  END IF;
  IF cardinality(v_ids) = 0 THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT * FROM cyclone_start_steps(v_runs, v_ids, p_owner, p_lease_ttl_ms);
END $$;

CREATE OR REPLACE FUNCTION cyclone_insert_and_start(p_ids uuid[], p_kinds text[], p_inputs jsonb[], p_queues text[],
                                                    p_retention_ms bigint[], p_priorities smallint[],
                                                    p_max_attempts integer[], p_max_reclaims integer[],
                                                    p_timeout_ms bigint[], p_process_at timestamptz[],
                                                    p_process_in_ms bigint[], p_trace_contexts jsonb[],
                                                    p_backoff_ms text[], p_flow_keys text[], p_rate_keys text[],
                                                    p_start_queue text, p_start_kinds text[], p_start_limit integer,
                                                    p_owner text, p_lease_ttl_ms bigint)
RETURNS TABLE (woken text, id bigint, run_id uuid, node_id text, kind text, attempt integer, max_attempts integer,
               reclaims integer, lease_generation bigint, timeout_ms bigint, input jsonb, upstream jsonb,
               trace_context jsonb, wait_ms float8)
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_due  uuid[];
  v_low  uuid;
  v_runs uuid[];
  v_ids  bigint[];
BEGIN
  SELECT array_agg(i.id) INTO v_due
    FROM cyclone_insert_jobs(p_ids, p_kinds, p_inputs, p_queues, NULL, p_retention_ms, p_priorities, p_max_attempts,
                             p_max_reclaims, p_timeout_ms, p_process_at, p_process_in_ms, p_trace_contexts,
                             p_backoff_ms, p_flow_keys, p_rate_keys, false) i
   WHERE i.due;
  IF v_due IS NULL THEN
    RETURN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM cyclone_paused_queues p WHERE p.queue = p_start_queue) THEN
    v_low := (SELECT f.low FROM cyclone_claim_floor f);
    SELECT array_agg(s.run_id), array_agg(s.id) INTO v_runs, v_ids
      FROM (SELECT s.run_id, s.id FROM cyclone_steps s
             WHERE s.run_id = ANY (v_due) AND s.state = 'available' AND s.flow_key IS NULL
               AND s.queue = p_start_queue AND s.kind = ANY (p_start_kinds) AND s.run_id >= v_low
               AND NOT EXISTS (SELECT 1 FROM cyclone_steps c
                                WHERE c.state = 'available' AND c.flow_key IS NULL AND c.queue = p_start_queue
                                  AND c.priority >= s.priority AND c.scheduled_at <= now() AND c.run_id >= v_low
                                  AND c.run_id <> ALL (v_due))
             ORDER BY s.priority DESC, s.id
             LIMIT p_start_limit) s;
    IF v_ids IS NOT NULL THEN
      DELETE FROM cyclone_outbox o WHERE o.step_id = ANY (v_ids);
      RETURN QUERY SELECT NULL::text, c.* FROM cyclone_start_steps(v_runs, v_ids, p_owner, p_lease_ttl_ms) c;
    END IF;
  END IF;
  RETURN QUERY
    SELECT DISTINCT s.queue, NULL::bigint, NULL::uuid, NULL::text, NULL::text, NULL::integer, NULL::integer,
           NULL::integer, NULL::bigint, NULL::bigint, NULL::jsonb, NULL::jsonb, NULL::jsonb, NULL::float8
      FROM cyclone_steps s
     WHERE s.run_id = ANY (v_due) AND s.state = 'available' AND s.run_id >= cyclone_lowest_id(v_due);
END $$;

CREATE OR REPLACE FUNCTION cyclone_live_floor() RETURNS uuid
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN cyclone_month_floor(least(date_trunc('month', now() AT TIME ZONE 'UTC') - interval '1 month',
    cyclone_run_month((SELECT id FROM cyclone_runs WHERE state = 'running' ORDER BY id LIMIT 1)),
    cyclone_run_month((SELECT id FROM cyclone_runs WHERE state = 'paused' ORDER BY id LIMIT 1))));
END $$;

CREATE OR REPLACE FUNCTION cyclone_complete_steps(p_run_ids uuid[], p_ids bigint[], p_owner text,
                                                  p_generations bigint[], p_outputs jsonb[])
RETURNS TABLE (id bigint, generation bigint)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_lo     uuid := cyclone_lowest_id(p_run_ids);
  v_runs   uuid[];
  v_ids    bigint[];
  v_gens   bigint[];
  v_done   uuid[];
  v_notify uuid[];
  v_child  uuid[];
  v_drop   uuid[];
BEGIN
  -- The runs' locks first, in id order (cyclone_lock_runs, here so its plan is kept too).
  SELECT array_agg(r.id) FILTER (WHERE r.drop) INTO v_drop
    FROM (SELECT r.id, r.retention = interval '0' AND r.workflow IS NULL AND NOT r.notify_finish AND r.parent_id IS NULL
                   AND r.state IN ('running', 'paused') AS drop
            FROM cyclone_runs r WHERE r.id = ANY (p_run_ids) AND r.id >= v_lo ORDER BY r.id FOR UPDATE) r;

  IF v_drop IS NOT NULL THEN
    WITH gone AS (
      DELETE FROM cyclone_steps s
       USING unnest(p_run_ids, p_ids, p_generations) AS t(run_id, id, generation)
       WHERE s.run_id = t.run_id AND s.id = t.id AND s.run_id = ANY (v_drop) AND s.run_id >= v_lo AND s.state = 'running'
         AND s.lease_owner = p_owner AND s.lease_generation = t.generation
         AND (s.timeout IS NULL OR s.started_at + s.timeout > now())
      RETURNING s.run_id, s.id, s.lease_generation
    )
    SELECT array_agg(g.run_id), array_agg(g.id), array_agg(g.lease_generation) INTO v_drop, v_ids, v_gens FROM gone g;
  END IF;
  IF v_drop IS NOT NULL THEN
    DELETE FROM cyclone_attempts a WHERE a.run_id = ANY (v_drop) AND a.run_id >= v_lo;
    WITH runs AS (
      DELETE FROM cyclone_runs r WHERE r.id = ANY (v_drop) AND r.id >= v_lo RETURNING r.id, r.unique_key
    )
    DELETE FROM cyclone_unique_keys k USING runs WHERE runs.unique_key IS NOT NULL AND k.unique_key = runs.unique_key AND k.run_id = runs.id;
  END IF;

  WITH completed AS (
    UPDATE cyclone_steps s
       SET state = 'completed', output = t.output, error = NULL, error_kind = NULL,
           finished_at = now(), updated_at = now(), lease_expiry = NULL
      FROM unnest(p_run_ids, p_ids, p_generations, p_outputs) AS t(run_id, id, generation, output)
     WHERE s.run_id = t.run_id AND s.id = t.id AND s.run_id >= v_lo AND s.state = 'running'
       AND s.lease_owner = p_owner AND s.lease_generation = t.generation
       AND (s.timeout IS NULL OR s.started_at + s.timeout > now())
    RETURNING s.run_id, s.id, s.lease_generation
  )
  SELECT array_agg(c.run_id), coalesce(v_ids, '{}') || array_agg(c.id), coalesce(v_gens, '{}') || array_agg(c.lease_generation)
    INTO v_runs, v_ids, v_gens FROM completed c;
  IF v_runs IS NULL THEN
    RETURN QUERY SELECT * FROM unnest(v_ids, v_gens);
    RETURN;
  END IF;

  -- A standalone job's run completes with its one step: no routing, no
  -- counting of its steps. (A paused run may complete: nothing is left to hold.)
  -- A job a code workflow started as its child tells its parent.
  WITH finished AS (
    UPDATE cyclone_runs r
       SET state = 'completed', updated_at = now(), finished_at = now(),
           delete_after = now() + cyclone_kept_for(r.retention, 'completed', r.notify_finish)
     WHERE r.id = ANY (v_runs) AND r.id >= v_lo AND r.workflow IS NULL AND r.state IN ('running', 'paused')
    RETURNING r.id, r.notify_finish, r.unique_key, r.parent_id
  ), freed AS (
    DELETE FROM cyclone_unique_keys k
     USING finished f
     WHERE f.unique_key IS NOT NULL AND k.unique_key = f.unique_key AND k.run_id = f.id
  )
  SELECT array_agg(f.id), array_agg(f.id) FILTER (WHERE f.notify_finish), array_agg(f.id) FILTER (WHERE f.parent_id IS NOT NULL)
    INTO v_done, v_notify, v_child FROM finished f;
  PERFORM pg_notify('cyclone_run_finished', finished_id::text) FROM unnest(v_notify) AS finished_id;
  IF v_child IS NOT NULL THEN
    PERFORM cyclone_deliver_results(v_child);
  END IF;

  -- The rest are workflow runs: route below the completed nodes, then settle.
  v_runs := ARRAY(SELECT unnest(v_runs) EXCEPT SELECT unnest(v_done));
  IF cardinality(v_runs) > 0 THEN
    PERFORM cyclone_release_successors(v_runs);
    PERFORM cyclone_settle_runs(v_runs);
  END IF;
  RETURN QUERY SELECT * FROM unnest(v_ids, v_gens);
END $$;

DROP FUNCTION IF EXISTS cyclone_claim_steps_from(text, text[], integer, text, bigint, smallint[], timestamptz[]);
DROP FUNCTION IF EXISTS cyclone_insert_and_start_from(uuid[], text[], jsonb[], text[], bigint[], smallint[], integer[],
                                                      integer[], bigint[], timestamptz[], bigint[], jsonb[], text[],
                                                      text[], text[], text, text[], integer, text, bigint, smallint[],
                                                      timestamptz[]);
DROP FUNCTION IF EXISTS cyclone_claim_floors(text, text[], smallint[], timestamptz[]);
DROP FUNCTION IF EXISTS cyclone_claim_bands(text, uuid, integer, smallint[], timestamptz[]);
DROP FUNCTION IF EXISTS cyclone_floor_below(timestamptz);

DELETE FROM cyclone_schema_migrations WHERE version = 19;
