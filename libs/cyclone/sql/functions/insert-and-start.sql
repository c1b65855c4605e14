-- An enqueue that starts its jobs in this client's idle workers: inserts
-- them as cyclone_insert_jobs does (the same arrays), then starts up to
-- p_start_limit of the due ones of p_start_queue and p_start_kinds, leased to
-- p_owner, in the same statement and commit. The job is running when the
-- enqueue returns: no wake-up, no claim and no second commit between the
-- enqueue and its handler's first line (the claim costs a round trip and a
-- WAL flush of its own).
--
-- Only when nothing older waits: a due available step of the queue at the
-- same or a higher priority, other than these, leaves the new ones to the
-- claim, which takes them in order; each band is read from the client's
-- floor for it (claim-bands.sql). Not on a paused queue; not for kinds
-- with limits (their claim counts what runs). The new rows are this
-- transaction's own, invisible to every other, so they need no lock. With
-- broker dispatch on, their outbox rows (written by the insert) are deleted:
-- nothing is left to publish.
--
-- Returns the started steps (woken NULL), then one row (id NULL) for each
-- queue that has due jobs of this batch still available, to wake, then,
-- when it read the bands, one row (woken and id NULL) with the client's
-- floors moved on: a band read without an older step in it is empty up to
-- now, as after a claim that emptied it (cyclone_floor_below).
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
