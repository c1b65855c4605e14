-- Claims under flow control: kinds with a concurrency limit or a rate limit,
-- and queues with a cluster-wide cap. Kinds and queues without limits are
-- claimed by the plain claim statement (src/sql/claim.sql.ts), which pays
-- for none of this.
--
-- A step of a limited kind carries flow_key from its enqueue: the key its
-- kind's key function gave for its input, or '' for a kind-wide limit (and
-- rate_key, the rate limit's key, when the kind has one). Its available rows
-- are indexed apart (cyclone_steps_flow), so the plain claim never walks over
-- a backlog held back by a limit, and its running rows are counted over
-- cyclone_steps_flow_running.
--
-- Nothing counts slots up and down: what is running is counted from the
-- steps themselves (a running step has a lease, lease_expiry set; every way
-- out of running clears it). A step that completes, fails, is retried,
-- snoozed, handed back, cancelled, timed out or discarded frees its room by
-- that same write, and a crashed holder's room comes back when the sweep
-- reclaims its step. No path can leak room.

-- Starts steps the caller has locked (FOR UPDATE) in this transaction:
-- running, leased to p_owner, generation bumped, progress cleared, with the
-- run's trace context and the wait since due, as the plain claim does. A
-- step's input is the run's, unless the node has its own (a code workflow's
-- wf.step).
-- Joins by primary key must stay nested loops, whatever the statistics say
-- (see complete-steps.sql), hence the planner settings here and below. The
-- months before the batch's oldest run are left out (live-months.sql).
CREATE OR REPLACE FUNCTION cyclone_start_steps(p_run_ids uuid[], p_ids bigint[], p_owner text, p_lease_ttl_ms bigint)
RETURNS TABLE (id bigint, run_id uuid, node_id text, kind text, attempt integer, max_attempts integer,
               reclaims integer, lease_generation bigint, timeout_ms bigint, input jsonb, upstream jsonb,
               trace_context jsonb, wait_ms float8)
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off
AS $$
DECLARE
  v_lo uuid := cyclone_lowest_id(p_run_ids);
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
     AND s.run_id >= v_lo AND r.id >= v_lo
  RETURNING s.id, s.run_id, s.node_id, s.kind, s.attempt, s.max_attempts, s.reclaims, s.lease_generation,
            (extract(epoch FROM s.timeout) * 1000)::bigint,
            coalesce(s.input, r.input),
            CASE WHEN cardinality(s.depends_on) > 0 THEN
              (SELECT jsonb_object_agg(u.node_id, u.output) FROM cyclone_steps u
                WHERE u.run_id = s.run_id AND u.node_id = ANY (s.depends_on) AND u.run_id >= v_lo)
            END,
            r.trace_context,
            (extract(epoch FROM now() - s.scheduled_at) * 1000)::float8;
END $$;

-- One claim of up to p_limit steps from one source of a queue: one limited
-- kind (p_limited, p_kinds holding that kind), or the queue's kinds without
-- limits when the queue has a cap (p_queue_cap). Returns the started steps,
-- then one status row (id NULL) with the cursor for the next claim of this
-- kind and whether due work was held back by a limit (the worker claims
-- again as soon as one of its own steps of the kind finishes).
--
-- Fairness: steps of a kind with a key are claimed round-robin over the keys
-- that have due work, from the key after p_cursor (the last one served),
-- wrapping around once; each key found by one probe of the index, so a key
-- with a long backlog costs the same as any other, and it takes its turn
-- like any other. Within a key, and for a kind-wide limit, steps go in the
-- plain claim order (priority, then scheduled_at, then insertion).
--
-- Every scan reads only the months from cyclone_claim_floor on: the steps it
-- looks for, available or running, belong to unfinished runs (live-months.sql).
CREATE OR REPLACE FUNCTION cyclone_claim_flow(
  p_queue text, p_kinds text[], p_limited boolean, p_keyed boolean, p_limit integer, p_owner text,
  p_lease_ttl_ms bigint, p_queue_cap integer, p_kind_cap integer, p_key_cap integer,
  p_rate_limit integer, p_rate_per_ms bigint, p_rate_keyed boolean, p_cursor text)
RETURNS TABLE (id bigint, run_id uuid, node_id text, kind text, attempt integer, max_attempts integer,
               reclaims integer, lease_generation bigint, timeout_ms bigint, input jsonb, upstream jsonb,
               trace_context jsonb, wait_ms float8, next_cursor text, held_back boolean)
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_kind     text := p_kinds[1];
  v_free     integer := p_limit;
  v_held     boolean := false;
  v_key      text;
  v_next     text;
  v_wrapped  boolean := p_cursor IS NULL;
  v_probes   integer := 0;
  -- A claim looks at this many keys at most, so one whose keys are all at
  -- their limit stays short; the next claim goes on from where it stopped.
  v_max_probes integer := greatest(4 * p_limit, 64);
  v_room     integer;
  v_keys     text[] := '{}';
  v_rooms    integer[] := '{}';
  v_cursor   text := p_cursor;
  v_runs     uuid[];
  v_ids      bigint[];
  v_rate     text[];
  v_pick_r   uuid[] := '{}';
  v_pick_i   bigint[] := '{}';
  v_used     jsonb := '{}';
  v_running  jsonb := '{}';
  v_scope    text;
  v_n        integer;
  v_low      uuid;
  v_paused   boolean;
BEGIN
  SELECT f.low, EXISTS (SELECT 1 FROM cyclone_paused_queues p WHERE p.queue = p_queue)
    INTO v_low, v_paused FROM cyclone_claim_floor f;
  IF v_paused THEN
    next_cursor := p_cursor;
    held_back := false;
    RETURN NEXT;
    RETURN;
  END IF;

  -- The queue's lock before the kind's: every claim takes them in this order.
  IF p_queue_cap IS NOT NULL THEN
    PERFORM cyclone_lock_flow('queue:' || p_queue);
  END IF;
  IF p_limited THEN
    PERFORM cyclone_lock_flow('kind:' || v_kind);
  END IF;

  -- Each count below is a statement of its own, so it sees every claim
  -- that held these locks before this one.
  IF p_queue_cap IS NOT NULL THEN
    v_room := p_queue_cap - (SELECT count(*) FROM cyclone_steps s
                              WHERE s.lease_expiry IS NOT NULL AND s.queue = p_queue
                                AND s.run_id >= v_low);
    v_held := v_room < v_free;
    v_free := least(v_free, v_room);
  END IF;
  IF p_kind_cap IS NOT NULL THEN
    v_room := p_kind_cap - (SELECT count(*) FROM cyclone_steps s
                             WHERE s.lease_expiry IS NOT NULL AND s.flow_key IS NOT NULL AND s.kind = v_kind
                               AND s.run_id >= v_low);
    v_held := v_held OR v_room < v_free;
    v_free := least(v_free, v_room);
  END IF;
  IF p_rate_limit IS NOT NULL AND NOT p_rate_keyed THEN
    v_room := p_rate_limit - cyclone_rate_used('rate:' || v_kind, p_rate_per_ms);
    v_held := v_held OR v_room < v_free;
    v_free := least(v_free, v_room);
  END IF;

  IF v_free <= 0 THEN
    next_cursor := p_cursor;
    held_back := true;
    RETURN NEXT;
    RETURN;
  END IF;

  IF NOT p_limited THEN
    -- The kinds without limits of a capped queue, in the plain claim's order.
    SELECT array_agg(c.run_id), array_agg(c.id) INTO v_runs, v_ids
      FROM (SELECT s.run_id, s.id FROM cyclone_steps s
             WHERE s.state = 'available' AND s.flow_key IS NULL AND s.queue = p_queue AND s.kind = ANY (p_kinds)
               AND s.scheduled_at <= now() AND s.run_id >= v_low
             ORDER BY s.priority DESC, s.scheduled_at, s.id
             LIMIT v_free
               FOR UPDATE SKIP LOCKED) c;
    RETURN QUERY SELECT *, NULL::text, NULL::boolean FROM cyclone_start_steps(v_runs, v_ids, p_owner, p_lease_ttl_ms);
    next_cursor := p_cursor;
    held_back := v_held AND coalesce(cardinality(v_ids), 0) = v_free;
    RETURN NEXT;
    RETURN;
  END IF;

  IF NOT p_keyed THEN
    -- A kind-wide limit: one key (''), taken in the plain claim's order,
    -- picked and started by one statement.
    RETURN QUERY
    WITH picked AS (
      SELECT s.run_id, s.id FROM cyclone_steps s
       WHERE s.state = 'available' AND s.flow_key IS NOT NULL AND s.queue = p_queue AND s.kind = v_kind
         AND s.flow_key = '' AND s.scheduled_at <= now() AND s.run_id >= v_low
       ORDER BY s.priority DESC, s.scheduled_at, s.id
       LIMIT v_free
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
     WHERE s.run_id = picked.run_id AND s.id = picked.id AND r.id = s.run_id AND s.run_id >= v_low AND r.id >= v_low
    RETURNING s.id, s.run_id, s.node_id, s.kind, s.attempt, s.max_attempts, s.reclaims, s.lease_generation,
              (extract(epoch FROM s.timeout) * 1000)::bigint,
              coalesce(s.input, r.input),
              CASE WHEN cardinality(s.depends_on) > 0 THEN
                (SELECT jsonb_object_agg(u.node_id, u.output) FROM cyclone_steps u
                  WHERE u.run_id = s.run_id AND u.node_id = ANY (s.depends_on))
              END,
              r.trace_context,
              (extract(epoch FROM now() - s.scheduled_at) * 1000)::float8,
              NULL::text, NULL::boolean;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF p_rate_limit IS NOT NULL AND v_n > 0 THEN
      PERFORM cyclone_rate_record(array_fill('rate:' || v_kind, ARRAY[v_n]), p_rate_per_ms);
    END IF;
    next_cursor := p_cursor;
    held_back := v_held AND v_n = v_free;
    RETURN NEXT;
    RETURN;
  ELSE
    -- How many of each key run now, read once: the running steps of one
    -- kind are few (its limits keep them so).
    IF p_key_cap IS NOT NULL THEN
      SELECT coalesce(jsonb_object_agg(r.flow_key, r.n), '{}') INTO v_running
        FROM (SELECT s.flow_key, count(*) AS n FROM cyclone_steps s
               WHERE s.lease_expiry IS NOT NULL AND s.flow_key IS NOT NULL AND s.kind = v_kind
                 AND s.run_id >= v_low
               GROUP BY s.flow_key) r;
    END IF;
    -- The keys with due work and room, round-robin from the one after the
    -- cursor; each found by one probe of cyclone_steps_flow.
    LOOP
      EXIT WHEN v_probes >= v_max_probes OR cardinality(v_keys) >= v_free;
      IF v_key IS NULL AND NOT v_wrapped THEN
        SELECT s.flow_key INTO v_next FROM cyclone_steps s
         WHERE s.state = 'available' AND s.flow_key IS NOT NULL AND s.queue = p_queue AND s.kind = v_kind
           AND s.flow_key > p_cursor AND s.scheduled_at <= now() AND s.run_id >= v_low
         ORDER BY s.flow_key LIMIT 1;
      ELSIF v_key IS NULL THEN
        SELECT s.flow_key INTO v_next FROM cyclone_steps s
         WHERE s.state = 'available' AND s.flow_key IS NOT NULL AND s.queue = p_queue AND s.kind = v_kind
           AND s.scheduled_at <= now() AND s.run_id >= v_low
         ORDER BY s.flow_key LIMIT 1;
      ELSE
        SELECT s.flow_key INTO v_next FROM cyclone_steps s
         WHERE s.state = 'available' AND s.flow_key IS NOT NULL AND s.queue = p_queue AND s.kind = v_kind
           AND s.flow_key > v_key AND s.scheduled_at <= now() AND s.run_id >= v_low
         ORDER BY s.flow_key LIMIT 1;
      END IF;
      IF v_next IS NULL THEN
        -- The last key: go round to the first, once.
        EXIT WHEN v_wrapped;
        v_wrapped := true;
        v_key := NULL;
        CONTINUE;
      END IF;
      -- Past the cursor again after going round: every key has been looked at.
      EXIT WHEN v_wrapped AND p_cursor IS NOT NULL AND v_next > p_cursor;
      v_key := v_next;
      v_cursor := v_key;
      v_probes := v_probes + 1;
      v_room := least(v_free, p_key_cap - coalesce((v_running ->> v_key)::integer, 0));
      IF v_room <= 0 THEN
        v_held := true;
        CONTINUE;
      END IF;
      v_keys := v_keys || v_key;
      v_rooms := v_rooms || coalesce(v_room, v_free);
    END LOOP;
    v_held := v_held OR v_probes >= v_max_probes;
  END IF;

  IF cardinality(v_keys) = 0 THEN
    next_cursor := v_cursor;
    held_back := v_held;
    RETURN NEXT;
    RETURN;
  END IF;

  -- Each key's first step, then each key's second, and so on.
  SELECT array_agg(h.run_id ORDER BY h.rn, k.ord), array_agg(h.id ORDER BY h.rn, k.ord),
         array_agg(h.rate_key ORDER BY h.rn, k.ord)
    INTO v_runs, v_ids, v_rate
    FROM (SELECT * FROM unnest(v_keys, v_rooms) WITH ORDINALITY AS u(key, room, ord)) k
   CROSS JOIN LATERAL (
     SELECT s.run_id, s.id, s.rate_key, row_number() OVER (ORDER BY s.priority DESC, s.scheduled_at, s.id) AS rn
       FROM cyclone_steps s
      WHERE s.state = 'available' AND s.flow_key IS NOT NULL AND s.queue = p_queue AND s.kind = v_kind
        AND s.flow_key = k.key AND s.scheduled_at <= now() AND s.run_id >= v_low
      ORDER BY s.priority DESC, s.scheduled_at, s.id
      LIMIT k.room) h;

  -- The first v_free of them, less those whose rate key has no room left.
  FOR i IN 1 .. coalesce(cardinality(v_ids), 0) LOOP
    EXIT WHEN cardinality(v_pick_i) >= v_free;
    IF p_rate_limit IS NOT NULL AND p_rate_keyed THEN
      v_scope := 'rate:' || v_kind || ':' || coalesce(v_rate[i], '');
      IF NOT v_used ? v_scope THEN
        v_used := v_used || jsonb_build_object(v_scope, cyclone_rate_used(v_scope, p_rate_per_ms));
      END IF;
      v_n := (v_used ->> v_scope)::integer;
      IF v_n >= p_rate_limit THEN
        v_held := true;
        CONTINUE;
      END IF;
      v_used := v_used || jsonb_build_object(v_scope, v_n + 1);
    END IF;
    v_pick_r := v_pick_r || v_runs[i];
    v_pick_i := v_pick_i || v_ids[i];
  END LOOP;

  -- Lock what is still available; a row another transaction holds is left.
  SELECT array_agg(c.run_id), array_agg(c.id), array_agg(c.rate_key) INTO v_runs, v_ids, v_rate
    FROM (SELECT s.run_id, s.id, s.rate_key FROM cyclone_steps s
            JOIN unnest(v_pick_r, v_pick_i) AS t(run_id, id) ON s.run_id = t.run_id AND s.id = t.id
           WHERE s.state = 'available' AND s.run_id >= v_low
             FOR UPDATE OF s SKIP LOCKED) c;

  IF p_rate_limit IS NOT NULL AND cardinality(v_ids) > 0 THEN
    PERFORM cyclone_rate_record(
      CASE WHEN p_rate_keyed THEN ARRAY(SELECT 'rate:' || v_kind || ':' || coalesce(r, '') FROM unnest(v_rate) AS r)
           ELSE array_fill('rate:' || v_kind, ARRAY[cardinality(v_ids)]) END,
      p_rate_per_ms);
  END IF;

  RETURN QUERY SELECT *, NULL::text, NULL::boolean FROM cyclone_start_steps(v_runs, v_ids, p_owner, p_lease_ttl_ms);
  next_cursor := v_cursor;
  held_back := v_held;
  RETURN NEXT;
END $$;
