-- Restores the enqueue of version 19: a job that an idle worker of the
-- enqueuing client takes is inserted available and then started.

CREATE OR REPLACE FUNCTION cyclone_insert_jobs(p_ids uuid[], p_kinds text[], p_inputs jsonb[], p_queues text[],
                                               p_unique_keys text[], p_retention_ms bigint[], p_priorities smallint[],
                                               p_max_attempts integer[], p_max_reclaims integer[], p_timeout_ms bigint[],
                                               p_process_at timestamptz[], p_process_in_ms bigint[],
                                               p_trace_contexts jsonb[], p_backoff_ms text[], p_flow_keys text[],
                                               p_rate_keys text[], p_notify boolean)
RETURNS TABLE (id uuid, queue text, due boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH jobs AS (
    SELECT * FROM unnest(p_ids, p_kinds, p_inputs, p_queues, p_unique_keys, p_retention_ms, p_priorities,
                         p_max_attempts, p_max_reclaims, p_timeout_ms, p_process_at, p_process_in_ms,
                         p_trace_contexts, p_backoff_ms, p_flow_keys, p_rate_keys)
      AS t(id, kind, input, queue, unique_key, retention_ms, priority, max_attempts, max_reclaims, timeout_ms,
           process_at, process_in_ms, trace_context, backoff_ms, flow_key, rate_key)
  ), keys AS (
    INSERT INTO cyclone_unique_keys (unique_key, run_id)
    SELECT j.unique_key, j.id FROM jobs j WHERE p_unique_keys IS NOT NULL AND j.unique_key IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING run_id
  ), runs AS (
    INSERT INTO cyclone_runs (id, kind, input, queue, unique_key, retention, trace_context)
    SELECT j.id, j.kind, j.input, j.queue, j.unique_key, j.retention_ms * interval '1 millisecond', j.trace_context
      FROM jobs j
     WHERE j.unique_key IS NULL OR j.id IN (SELECT k.run_id FROM keys k)
    RETURNING id
  ), steps AS (
    INSERT INTO cyclone_steps (run_id, node_id, kind, queue, priority, state, max_attempts, max_reclaims,
                               timeout, scheduled_at, backoff_ms, flow_key, rate_key)
    SELECT j.id, j.kind, j.kind, j.queue, j.priority, 'available', j.max_attempts, j.max_reclaims,
           j.timeout_ms * interval '1 millisecond',
           COALESCE(j.process_at, now() + j.process_in_ms * interval '1 millisecond'), j.backoff_ms::bigint[],
           j.flow_key, j.rate_key
      FROM jobs j JOIN runs r ON r.id = j.id
    RETURNING run_id, queue, scheduled_at <= now() AS due
  )
  SELECT s.run_id, s.queue, s.due FROM steps s;
  -- The steps just inserted that are due now (in this transaction, now() is the insert's).
  IF p_notify THEN
    PERFORM pg_notify('cyclone_wake', q.queue)
       FROM (SELECT DISTINCT s.queue FROM cyclone_steps s WHERE s.run_id = ANY (p_ids) AND s.scheduled_at <= now()) q;
  END IF;
END $$;

CREATE OR REPLACE FUNCTION cyclone_insert_and_start_from(p_ids uuid[], p_kinds text[], p_inputs jsonb[], p_queues text[],
                                                         p_retention_ms bigint[], p_priorities smallint[],
                                                         p_max_attempts integer[], p_max_reclaims integer[],
                                                         p_timeout_ms bigint[], p_process_at timestamptz[],
                                                         p_process_in_ms bigint[], p_trace_contexts jsonb[],
                                                         p_backoff_ms text[], p_flow_keys text[], p_rate_keys text[],
                                                         p_start_queue text, p_start_kinds text[],
                                                         p_start_limit integer, p_owner text, p_lease_ttl_ms bigint,
                                                         p_bands smallint[], p_floors timestamptz[])
RETURNS TABLE (woken text, id bigint, run_id uuid, node_id text, kind text, attempt integer, max_attempts integer,
               reclaims integer, lease_generation bigint, timeout_ms bigint, input jsonb, upstream jsonb,
               trace_context jsonb, wait_ms float8, next_bands smallint[], next_floors timestamptz[])
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_due     uuid[];
  v_low     uuid;
  v_runs    uuid[];
  v_ids     bigint[];
  v_band    smallint;
  v_from    timestamptz;
  v_waiting smallint;
  v_lowest  smallint := (SELECT min(t.priority) FROM unnest(p_priorities) t(priority));
  v_bands   smallint[] := '{}';
  v_floors  timestamptz[] := '{}';
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
    -- The highest band where an older step waits: only new steps above it start here.
    FOR v_band, v_from IN
      SELECT b.band, b.floor FROM cyclone_claim_bands(p_start_queue, v_low, v_lowest, p_bands, p_floors) b
    LOOP
      IF v_waiting IS NULL AND EXISTS (
           SELECT 1 FROM cyclone_steps c
            WHERE c.state = 'available' AND c.flow_key IS NULL AND c.queue = p_start_queue AND c.priority = v_band
              AND c.scheduled_at >= v_from AND c.scheduled_at <= now() AND c.run_id >= v_low
              AND c.run_id <> ALL (v_due)) THEN
        v_waiting := v_band;
      END IF;
      IF v_waiting IS NULL OR v_from > '-infinity' THEN
        v_bands := v_bands || v_band;
        v_floors := v_floors || CASE WHEN v_waiting IS NULL THEN cyclone_floor_below(now()) ELSE v_from END;
      END IF;
    END LOOP;
    -- The new steps, read by their runs' keys: with the claim index's
    -- conditions inside, the planner would read them through that index
    -- (it expects few available steps), past every dead entry of the queue.
    SELECT array_agg(s.run_id), array_agg(s.id) INTO v_runs, v_ids
      FROM (SELECT s.run_id, s.id
              FROM (SELECT s.run_id, s.id, s.priority, s.state, s.flow_key, s.queue, s.kind FROM cyclone_steps s
                     WHERE s.run_id = ANY (v_due) AND s.run_id >= v_low
                    OFFSET 0) s
             WHERE s.state = 'available' AND s.flow_key IS NULL AND s.queue = p_start_queue
               AND s.kind = ANY (p_start_kinds) AND (v_waiting IS NULL OR s.priority > v_waiting)
             ORDER BY s.priority DESC, s.id
             LIMIT p_start_limit) s;
    IF v_ids IS NOT NULL THEN
      DELETE FROM cyclone_outbox o WHERE o.step_id = ANY (v_ids);
      RETURN QUERY SELECT NULL::text, c.*, NULL::smallint[], NULL::timestamptz[]
                     FROM cyclone_start_steps(v_runs, v_ids, p_owner, p_lease_ttl_ms) c;
    END IF;
    -- The bands below the batch's were not read: they keep their floors.
    RETURN QUERY
      SELECT NULL::text, NULL::bigint, NULL::uuid, NULL::text, NULL::text, NULL::integer, NULL::integer,
             NULL::integer, NULL::bigint, NULL::bigint, NULL::jsonb, NULL::jsonb, NULL::jsonb, NULL::float8,
             v_bands || coalesce(array_agg(b.band), '{}'), v_floors || coalesce(array_agg(b.floor), '{}')
        FROM unnest(p_bands, p_floors) AS b(band, floor)
       WHERE b.band < v_lowest;
  END IF;
  RETURN QUERY
    SELECT DISTINCT s.queue, NULL::bigint, NULL::uuid, NULL::text, NULL::text, NULL::integer, NULL::integer,
           NULL::integer, NULL::bigint, NULL::bigint, NULL::jsonb, NULL::jsonb, NULL::jsonb, NULL::float8,
           NULL::smallint[], NULL::timestamptz[]
      FROM cyclone_steps s
     WHERE s.run_id = ANY (v_due) AND s.state = 'available' AND s.run_id >= cyclone_lowest_id(v_due);
END $$;

DROP FUNCTION IF EXISTS cyclone_insert_jobs_leased(uuid[], text[], jsonb[], text[], text[], bigint[], smallint[], integer[],
                                                  integer[], bigint[], timestamptz[], bigint[], jsonb[], text[], text[],
                                                  text[], integer[], text, bigint);

DELETE FROM cyclone_schema_migrations WHERE version = 20;
