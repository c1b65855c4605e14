-- An enqueue that starts its jobs in this client's idle workers: inserts
-- them as cyclone_insert_jobs does (the same arrays), up to p_start_limit of
-- the due ones of p_start_queue and p_start_kinds written as started, leased
-- to p_owner (cyclone_insert_jobs_leased), in the same statement and commit.
-- The job is running when the enqueue returns: no wake-up, no claim and no
-- second commit between the enqueue and its handler's first line (the claim
-- costs a round trip and a WAL flush of its own), and its step is written
-- once, never available: no claim index entry, no outbox row.
--
-- Only when nothing older waits: a due available step of the queue at the
-- same or a higher priority leaves the new ones to the claim, which takes
-- them in order; each band is read from the client's floor for it
-- (claim-bands.sql), before the insert. Not on a paused queue; not for kinds
-- with limits (their claim counts what runs).
--
-- Returns the started steps (woken NULL), then one row (id NULL) for each
-- queue that has due jobs of this batch left available, to wake, then, when
-- it read the bands, one row (woken and id NULL) with the client's floors
-- moved on: a band read without an older step in it is empty up to now, as
-- after a claim that emptied it (cyclone_floor_below).
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
  v_low     uuid;
  v_started integer[];
  v_band    smallint;
  v_from    timestamptz;
  v_waiting smallint;
  v_lowest  smallint := (SELECT min(t.priority) FROM unnest(p_priorities) t(priority));
  v_bands   smallint[] := '{}';
  v_floors  timestamptz[] := '{}';
  v_read    boolean := false;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM cyclone_paused_queues p WHERE p.queue = p_start_queue) THEN
    v_read := true;
    v_low := (SELECT f.low FROM cyclone_claim_floor f);
    -- The highest band where an older step waits: only new steps above it start here.
    FOR v_band, v_from IN
      SELECT b.band, b.floor FROM cyclone_claim_bands(p_start_queue, v_low, v_lowest, p_bands, p_floors) b
    LOOP
      IF v_waiting IS NULL AND EXISTS (
           SELECT 1 FROM cyclone_steps c
            WHERE c.state = 'available' AND c.flow_key IS NULL AND c.queue = p_start_queue AND c.priority = v_band
              AND c.scheduled_at >= v_from AND c.scheduled_at <= now() AND c.run_id >= v_low) THEN
        v_waiting := v_band;
      END IF;
      IF v_waiting IS NULL OR v_from > '-infinity' THEN
        v_bands := v_bands || v_band;
        v_floors := v_floors || CASE WHEN v_waiting IS NULL THEN cyclone_floor_below(now()) ELSE v_from END;
      END IF;
    END LOOP;
    -- The jobs to start, in the claim's order: priority, then the batch's order.
    SELECT array_agg(t.position) INTO v_started
      FROM (SELECT t.position
              FROM unnest(p_queues, p_kinds, p_priorities, p_process_at, p_process_in_ms, p_flow_keys) WITH ORDINALITY
                AS t(queue, kind, priority, process_at, process_in_ms, flow_key, position)
             WHERE t.queue = p_start_queue AND t.kind = ANY (p_start_kinds) AND t.flow_key IS NULL
               AND COALESCE(t.process_at, now() + t.process_in_ms * interval '1 millisecond') <= now()
               AND (v_waiting IS NULL OR t.priority > v_waiting)
             ORDER BY t.priority DESC, t.position
             LIMIT p_start_limit) t;
  END IF;
  -- A started job's input and trace context are its run's: read from the
  -- arrays by its position, not from the rows just written.
  RETURN QUERY
    WITH inserted AS (
      SELECT i.*
        FROM cyclone_insert_jobs_leased(p_ids, p_kinds, p_inputs, p_queues, NULL, p_retention_ms, p_priorities,
                                        p_max_attempts, p_max_reclaims, p_timeout_ms, p_process_at,
                                        p_process_in_ms, p_trace_contexts, p_backoff_ms, p_flow_keys, p_rate_keys,
                                        v_started, p_owner, p_lease_ttl_ms) i
    )
    SELECT NULL::text, i.step_id, i.id, p_kinds[p.position], p_kinds[p.position], 1, p_max_attempts[p.position], 0,
           1::bigint, p_timeout_ms[p.position], p_inputs[p.position], NULL::jsonb, p_trace_contexts[p.position],
           i.wait_ms, NULL::smallint[], NULL::timestamptz[]
      FROM inserted i, LATERAL (SELECT array_position(p_ids, i.id) AS position) p
     WHERE i.started
    UNION ALL
    SELECT DISTINCT i.queue, NULL::bigint, NULL::uuid, NULL::text, NULL::text, NULL::integer, NULL::integer,
           NULL::integer, NULL::bigint, NULL::bigint, NULL::jsonb, NULL::jsonb, NULL::jsonb, NULL::float8,
           NULL::smallint[], NULL::timestamptz[]
      FROM inserted i
     WHERE i.due AND NOT i.started;
  IF v_read THEN
    -- The bands below the batch's were not read: they keep their floors.
    RETURN QUERY
      SELECT NULL::text, NULL::bigint, NULL::uuid, NULL::text, NULL::text, NULL::integer, NULL::integer,
             NULL::integer, NULL::bigint, NULL::bigint, NULL::jsonb, NULL::jsonb, NULL::jsonb, NULL::float8,
             v_bands || coalesce(array_agg(b.band), '{}'), v_floors || coalesce(array_agg(b.floor), '{}')
        FROM unnest(p_bands, p_floors) AS b(band, floor)
       WHERE b.band < v_lowest;
  END IF;
END $$;

-- The enqueue of clients of version 18 and before, without floors.
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
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY
  SELECT c.woken, c.id, c.run_id, c.node_id, c.kind, c.attempt, c.max_attempts, c.reclaims, c.lease_generation,
         c.timeout_ms, c.input, c.upstream, c.trace_context, c.wait_ms
    FROM cyclone_insert_and_start_from(p_ids, p_kinds, p_inputs, p_queues, p_retention_ms, p_priorities,
                                       p_max_attempts, p_max_reclaims, p_timeout_ms, p_process_at,
                                       p_process_in_ms, p_trace_contexts, p_backoff_ms, p_flow_keys, p_rate_keys,
                                       p_start_queue, p_start_kinds, p_start_limit, p_owner, p_lease_ttl_ms, NULL,
                                       NULL) c
   WHERE c.woken IS NOT NULL OR c.id IS NOT NULL;
END $$;
