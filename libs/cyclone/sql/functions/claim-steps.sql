-- The claim: as many available steps of a queue and of the kinds this
-- client runs as it asks for (its free slots, and some ahead under a
-- backlog), in claim order (priority, then due
-- time, then age). SKIP LOCKED lets many workers claim side by side without
-- waiting on each other's rows; all times are the database's. The lease
-- generation is bumped so that every later write of this attempt can
-- compare-and-set on it. Upstream outputs are read only for workflow nodes
-- that have upstreams. A paused queue (pauseQueue) claims nothing. Steps of
-- kinds with limits (flow_key set) are cyclone_claim_flow's. A new
-- attempt starts without the progress an earlier one reported; it returns the
-- run's trace context (for the attempt's span) and how long the step waited
-- since it was due.
--
-- A function for its planner settings: planned afresh on each call, a
-- statement over every month's partitions costs about a millisecond to plan,
-- more than claiming a few steps; so its plan is made once per connection,
-- and as that plan cannot see the batch size, its joins are held to nested
-- loops over the keys. (A claim of one step took 1.5 ms planned each time,
-- 0.4 ms with the kept plan.)
--
-- The claim order leads with priority, so steps due later (delayed, or
-- retrying in backoff) at a higher priority lie in the claim index before
-- every due step of a lower one. One scan in claim order walked all of them
-- on each claim (200,000 delayed steps at priority 5: 9 ms a claim of 50 on
-- PostgreSQL 15, against 1.3 ms this way); PostgreSQL 18 can skip them, its
-- predecessors cannot. So the claim takes the priorities one at a time,
-- highest first: each priority's due steps are one bounded range of the
-- index, and the next priority is found by one probe. Queues use few
-- priorities, so a claim makes few probes.
--
-- Every scan reads only the months from cyclone_claim_floor on, which hold
-- every step that can be claimed (live-months.sql), and each band from the
-- client's floor for it (claim-bands.sql). The last row (id NULL) gives the
-- floors for the next claim (cyclone_floor_below): in a band this claim
-- emptied (of what it could see), from now; in the band where it filled up,
-- from the first step it took (the steps before it were claimed by others,
-- or locked by a claim that may yet roll back); a band it did not reach
-- keeps its floor.
--
-- A claim that came back with fewer steps than it asked for, while another
-- client holds steps of the queue claimed ahead of its slots, asks for them
-- with a NOTIFY on cyclone_idle (the queue as payload): that client hands
-- back those still waiting for a slot, so no step waits in a busy worker
-- while this one has room. Steps claimed ahead are leased for at most 3 s
-- (the client's aheadTimes); a lease that ends within 3 s is the sign of
-- them. Other leases that end soon only cost a NOTIFY that frees nothing.
-- The steps handed back keep their place, below this client's floors: the
-- last row says it asked (asked_back), and the client's next claim reads
-- every band from its start.
CREATE OR REPLACE FUNCTION cyclone_claim_steps_from(p_queue text, p_kinds text[], p_limit integer, p_owner text,
                                                    p_lease_ttl_ms bigint, p_bands smallint[], p_floors timestamptz[])
RETURNS TABLE (id bigint, run_id uuid, node_id text, kind text, attempt integer, max_attempts integer,
               reclaims integer, lease_generation bigint, timeout_ms bigint, input jsonb, upstream jsonb,
               trace_context jsonb, wait_ms float8, next_bands smallint[], next_floors timestamptz[],
               asked_back boolean)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_low      uuid;
  v_paused   boolean;
  v_band     smallint;
  v_from     timestamptz;
  v_first    timestamptz;
  v_taken    integer;
  v_runs     uuid[] := '{}';
  v_ids      bigint[] := '{}';
  v_left     integer := p_limit;
  v_bands    smallint[] := '{}';
  v_floors   timestamptz[] := '{}';
  v_asked    boolean := false;
BEGIN
  SELECT f.low, EXISTS (SELECT 1 FROM cyclone_paused_queues p WHERE p.queue = p_queue)
    INTO v_low, v_paused FROM cyclone_claim_floor f;
  IF v_paused THEN
    RETURN QUERY SELECT NULL::bigint, NULL::uuid, NULL::text, NULL::text, NULL::integer, NULL::integer, NULL::integer,
                        NULL::bigint, NULL::bigint, NULL::jsonb, NULL::jsonb, NULL::jsonb, NULL::float8,
                        coalesce(p_bands, '{}'), coalesce(p_floors, '{}'), false;
    RETURN;
  END IF;
  -- The same order as one scan: priority, then due time, then age.
  FOR v_band, v_from IN SELECT b.band, b.floor FROM cyclone_claim_bands(p_queue, v_low, -32768, p_bands, p_floors) b LOOP
    IF v_left > 0 THEN
      SELECT v_runs || coalesce(array_agg(c.run_id), '{}'), v_ids || coalesce(array_agg(c.id), '{}'),
             min(c.scheduled_at), count(*)
        INTO v_runs, v_ids, v_first, v_taken
        FROM (SELECT c.run_id, c.id, c.scheduled_at FROM cyclone_steps c
               WHERE c.state = 'available' AND c.flow_key IS NULL AND c.queue = p_queue AND c.priority = v_band
                 AND c.scheduled_at >= v_from AND c.scheduled_at <= now() AND c.run_id >= v_low
                 AND c.kind = ANY (p_kinds)
               ORDER BY c.scheduled_at, c.id
               LIMIT v_left
                 FOR UPDATE SKIP LOCKED) c;
      v_from := cyclone_floor_below(CASE WHEN v_taken < v_left THEN now() ELSE v_first END);
      v_left := v_left - v_taken;
    ELSIF v_from = '-infinity' THEN
      -- A band found by probing and not reached: found again next time.
      CONTINUE;
    END IF;
    v_bands := v_bands || v_band;
    v_floors := v_floors || v_from;
  END LOOP;
  IF v_left > 0 AND EXISTS (
       SELECT 1 FROM cyclone_steps c
        WHERE c.lease_expiry > now() AND c.lease_expiry <= now() + interval '3 seconds'
          AND c.state = 'running' AND c.queue = p_queue AND c.lease_owner <> p_owner AND c.run_id >= v_low) THEN
    PERFORM pg_notify('cyclone_idle', p_queue);
    v_asked := true;
  END IF;
  IF cardinality(v_ids) > 0 THEN
    RETURN QUERY SELECT c.*, NULL::smallint[], NULL::timestamptz[], NULL::boolean
                   FROM cyclone_start_steps(v_runs, v_ids, p_owner, p_lease_ttl_ms) c;
  END IF;
  RETURN QUERY SELECT NULL::bigint, NULL::uuid, NULL::text, NULL::text, NULL::integer, NULL::integer, NULL::integer,
                      NULL::bigint, NULL::bigint, NULL::jsonb, NULL::jsonb, NULL::jsonb, NULL::float8,
                      v_bands, v_floors, v_asked;
END $$;

-- The claim of clients of version 18 and before, without floors: every band
-- from its start.
CREATE OR REPLACE FUNCTION cyclone_claim_steps(p_queue text, p_kinds text[], p_limit integer, p_owner text,
                                               p_lease_ttl_ms bigint)
RETURNS TABLE (id bigint, run_id uuid, node_id text, kind text, attempt integer, max_attempts integer,
               reclaims integer, lease_generation bigint, timeout_ms bigint, input jsonb, upstream jsonb,
               trace_context jsonb, wait_ms float8)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY
  SELECT c.id, c.run_id, c.node_id, c.kind, c.attempt, c.max_attempts, c.reclaims, c.lease_generation, c.timeout_ms,
         c.input, c.upstream, c.trace_context, c.wait_ms
    FROM cyclone_claim_steps_from(p_queue, p_kinds, p_limit, p_owner, p_lease_ttl_ms, NULL, NULL) c
   WHERE c.id IS NOT NULL;
END $$;
