-- Restores the schema as it was before version 13: code workflows' runs and
-- nodes are deleted, the functions version 13 changed get their earlier
-- bodies back, and its own functions, indexes and columns are dropped. Runs,
-- steps, then attempts are locked first, as the up does.

LOCK TABLE cyclone_runs, cyclone_steps, cyclone_attempts IN ACCESS EXCLUSIVE MODE;

DELETE FROM cyclone_unique_keys WHERE run_id IN (SELECT id FROM cyclone_runs WHERE version IS NOT NULL);
DELETE FROM cyclone_attempts WHERE run_id IN (SELECT id FROM cyclone_runs WHERE version IS NOT NULL);
DELETE FROM cyclone_steps WHERE run_id IN (SELECT id FROM cyclone_runs WHERE version IS NOT NULL);
DELETE FROM cyclone_runs WHERE version IS NOT NULL;

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
-- run's trace context and the wait since due, as the plain claim does.
-- Joins by primary key must stay nested loops, whatever the statistics say
-- (see complete-steps.sql), hence the planner settings here and below. The
-- months before the batch's oldest run are left out (live-months.sql).
CREATE OR REPLACE FUNCTION cyclone_start_steps(p_run_ids uuid[], p_ids bigint[], p_owner text, p_lease_ttl_ms bigint)
RETURNS TABLE (id bigint, run_id uuid, node_id text, kind text, attempt integer, max_attempts integer,
               reclaims integer, lease_generation bigint, timeout_ms bigint, input jsonb, upstream jsonb,
               trace_context jsonb, wait_ms float8)
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET plan_cache_mode = force_generic_plan
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
            r.input,
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
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET plan_cache_mode = force_generic_plan
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
              r.input,
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

-- Routing. Pending nodes of the given runs whose upstream nodes are all
-- completed move on: a step becomes available, a sleep starts its timer, a
-- signal wait starts waiting (with its timeout). A signal wait whose signal
-- already arrived completes at once with it, which may release further nodes,
-- hence the loop. In a paused run nodes arrive paused. Queues that gained an
-- available step are woken. Callers hold the runs' locks.
--
-- A standalone job is a run of one node with nothing to route: every
-- completion batch calls this, so such runs are left out first, by one key
-- lookup each. The months before the oldest run are left out
-- (live-months.sql).
CREATE OR REPLACE FUNCTION cyclone_release_successors(p_run_ids uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_lo       uuid := cyclone_lowest_id(p_run_ids);
  v_runs     uuid[] := ARRAY(SELECT id FROM cyclone_runs WHERE id = ANY (p_run_ids) AND id >= v_lo AND workflow IS NOT NULL);
  v_woken    text[];
  v_consumed integer;
BEGIN
  IF cardinality(v_runs) = 0 THEN
    RETURN;
  END IF;
  LOOP
    WITH ready AS (
      SELECT s.run_id, s.id, r.state = 'paused' AS paused,
             CASE s.node_type WHEN 'step' THEN 'available' WHEN 'sleep' THEN 'waiting_timer'
                              ELSE 'waiting_signal' END AS next,
             CASE s.node_type
               WHEN 'sleep' THEN now() + (r.graph #>> ARRAY['nodes', s.node_id, 'sleepMs'])::bigint * interval '1 millisecond'
               WHEN 'signal' THEN now() + (r.graph #>> ARRAY['nodes', s.node_id, 'timeoutMs'])::bigint * interval '1 millisecond'
             END AS wake_at
        FROM cyclone_steps s
        JOIN cyclone_runs r ON r.id = s.run_id AND r.id >= v_lo
       WHERE s.run_id = ANY (v_runs) AND s.run_id >= v_lo
         AND s.state = 'pending'
         AND NOT EXISTS (
           SELECT 1 FROM cyclone_steps u
            WHERE u.run_id = s.run_id AND u.run_id >= v_lo AND u.node_id = ANY (s.depends_on) AND u.state <> 'completed')
    ), moved AS (
      UPDATE cyclone_steps s
         SET state        = CASE WHEN ready.paused THEN 'paused' ELSE ready.next END,
             paused_state = CASE WHEN ready.paused THEN ready.next END,
             wake_at      = ready.wake_at,
             scheduled_at = now(),
             updated_at   = now()
        FROM ready
       WHERE s.run_id = ready.run_id AND s.id = ready.id AND s.run_id >= v_lo
      RETURNING s.queue, s.state
    )
    SELECT array_agg(DISTINCT queue) INTO v_woken FROM moved WHERE state = 'available';
    PERFORM pg_notify('cyclone_wake', queue) FROM unnest(v_woken) AS queue;

    -- Signal waits that were signalled early: a lookup by run id, never by
    -- wake_at, so no partial index of waiting nodes can be taken for it.
    UPDATE cyclone_steps
       SET state = 'completed', output = signal, wake_at = NULL, finished_at = now(), updated_at = now()
     WHERE run_id = ANY (v_runs) AND run_id >= v_lo AND state = 'waiting_signal' AND signalled_at IS NOT NULL;
    GET DIAGNOSTICS v_consumed = ROW_COUNT;
    EXIT WHEN v_consumed = 0;
  END LOOP;
END $$;

-- Settling: a run's state recomputed from its steps. Callers hold the runs'
-- locks, so two steps finishing at once cannot both miss the other. Paused
-- and cancelled are set by the client only; a paused run may still complete.
-- A run fails once a step is discarded and nothing else of it can move on
-- (the nodes below stay pending, so a retry carries the run on). A finish is
-- announced only to clients waiting for it (notify_finish): a NOTIFY holds
-- the server-wide notification lock through its commit. The months before
-- the oldest run are left out (live-months.sql); plpgsql, because the
-- baseline migration creates this function before cyclone_lowest_id exists,
-- and a SQL function's body is checked when it is created.

CREATE OR REPLACE FUNCTION cyclone_settle_runs(p_run_ids uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_lo     uuid := cyclone_lowest_id(p_run_ids);
  v_notify uuid[];
BEGIN
  WITH next AS (
    SELECT r.id,
           CASE
             WHEN bool_and(s.state = 'completed') THEN 'completed'
             WHEN r.state = 'running' AND bool_or(s.state = 'discarded')
                  AND NOT bool_or(s.state IN ('available', 'running', 'waiting_signal', 'waiting_timer', 'paused'))
               THEN 'failed'
           END AS state
      FROM cyclone_runs r
      JOIN cyclone_steps s ON s.run_id = r.id
     WHERE r.id = ANY (p_run_ids) AND r.id >= v_lo AND s.run_id >= v_lo AND r.state IN ('running', 'paused')
     GROUP BY r.id, r.state
  ), settled AS (
    UPDATE cyclone_runs r
       SET state = next.state, updated_at = now(), finished_at = now(), delete_after = now() + r.retention
      FROM next
     WHERE r.id = next.id AND r.id >= v_lo AND next.state IS NOT NULL
    RETURNING r.id, r.notify_finish, r.unique_key
  ), freed AS (
    -- A finished run gives its unique key up.
    DELETE FROM cyclone_unique_keys k
     USING settled
     WHERE settled.unique_key IS NOT NULL AND k.unique_key = settled.unique_key AND k.run_id = settled.id
  )
  SELECT array_agg(settled.id) FILTER (WHERE settled.notify_finish) INTO v_notify FROM settled;
  PERFORM pg_notify('cyclone_run_finished', finished_id::text) FROM unnest(v_notify) AS finished_id;
END $$;

-- One run, for the transitions that settle a single run; returns its state.
CREATE OR REPLACE FUNCTION cyclone_settle_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM cyclone_settle_runs(ARRAY[p_run_id]);
  RETURN (SELECT state FROM cyclone_runs WHERE id = p_run_id);
END $$;

-- Completes many steps of one worker, each named by its run and its id
-- (arrays in the same order): a compare-and-set on each step's lease
-- (owner, generation, and the timeout on the database clock), so a late or
-- duplicate completion changes nothing. The runs are locked first; routing
-- and the runs' state changes commit with the steps. Returns the id and
-- generation of each step it completed. A single completion is a batch of
-- one: there is one completion path.
--
-- One statement for the whole batch: a statement on the partitioned tables
-- locks every partition each time it runs, so a statement per step would
-- pay for that hundreds of times a batch. Its plan is made once per
-- connection (planned afresh on every call, a statement over every month's
-- partitions costs about a millisecond to plan); made without the batch in
-- view, and on a young table (never analysed) or a freshly vacuumed one, the
-- statistics could make a hash join over a whole scan look cheaper, so the
-- joins are held to nested loops over the primary key, and the months before
-- the batch's oldest run are left out (live-months.sql).
CREATE OR REPLACE FUNCTION cyclone_complete_steps(p_run_ids uuid[], p_ids bigint[], p_owner text,
                                                  p_generations bigint[], p_outputs jsonb[])
RETURNS TABLE (id bigint, generation bigint)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off
AS $$
#variable_conflict use_column
DECLARE
  v_lo     uuid := cyclone_lowest_id(p_run_ids);
  v_runs   uuid[];
  v_ids    bigint[];
  v_gens   bigint[];
  v_done   uuid[];
  v_notify uuid[];
BEGIN
  -- The runs' locks first, in id order (cyclone_lock_runs, here so its plan is kept too).
  PERFORM 1 FROM cyclone_runs r WHERE r.id = ANY (p_run_ids) AND r.id >= v_lo ORDER BY r.id FOR UPDATE;

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
  SELECT array_agg(c.run_id), array_agg(c.id), array_agg(c.lease_generation) INTO v_runs, v_ids, v_gens FROM completed c;
  IF v_runs IS NULL THEN
    RETURN;
  END IF;

  -- A standalone job's run completes with its one step: no routing, no
  -- counting of its steps. (A paused run may complete: nothing is left to hold.)
  WITH finished AS (
    UPDATE cyclone_runs r
       SET state = 'completed', updated_at = now(), finished_at = now(), delete_after = now() + r.retention
     WHERE r.id = ANY (v_runs) AND r.id >= v_lo AND r.workflow IS NULL AND r.state IN ('running', 'paused')
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

-- A failed attempt: consumed, then retried after the step's own backoff for
-- that attempt (backoff_ms, stored when the step was written by a client
-- that runs its kind), else after p_retry_delay_ms, or, when attempts are
-- exhausted or the error is permanent, discarded. So a replica that does not
-- run the kind (its sweep consumes a timed-out attempt) applies the kind's
-- backoff all the same. An attempt
-- whose timeout elapsed on the database clock is recorded as a timeout
-- whatever the handler threw. A retry of a paused run's step is paused
-- (keep-paused.sql). A compare-and-set on the lease, under the run lock.
-- The attempt is recorded (record-attempt.sql) with the error's stack, when
-- the handler threw one: retried, discarded, or timed_out whatever followed.
-- Returns the step's new state, or NULL when the lease was lost.
CREATE OR REPLACE FUNCTION cyclone_fail_step(p_run_id uuid, p_step_id bigint, p_owner text, p_generation bigint,
                                             p_error text, p_error_kind text, p_retry_delay_ms bigint,
                                             p_stack text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_run_id     uuid;
  v_state      text;
  -- The ended attempt, as the step held it.
  v_attempt    integer;
  v_started_at timestamptz;
  v_error_kind text;
  v_next_state text;
BEGIN
  v_run_id := cyclone_lock_run(p_run_id);
  IF v_run_id IS NULL THEN
    RETURN NULL;
  END IF;

  UPDATE cyclone_steps s
     SET (state, paused_state) = (SELECT k.state, k.paused_state FROM cyclone_keep_paused(p_run_id, f.next_state) k),
         attempt      = CASE WHEN f.next_state = 'discarded' THEN s.attempt ELSE s.attempt + 1 END,
         scheduled_at = CASE WHEN f.next_state = 'discarded' THEN s.scheduled_at
                             ELSE now() + COALESCE(s.backoff_ms[s.attempt], p_retry_delay_ms)
                                          * interval '1 millisecond' END,
         finished_at  = CASE WHEN f.next_state = 'discarded' THEN now() END,
         error        = p_error,
         error_kind   = f.error_kind,
         lease_owner  = NULL,
         lease_expiry = NULL,
         updated_at   = now()
    FROM (SELECT CASE WHEN timeout IS NOT NULL AND started_at + timeout <= now() THEN 'timeout'
                      ELSE p_error_kind END AS error_kind,
                 CASE WHEN p_error_kind = 'permanent' OR attempt >= max_attempts THEN 'discarded'
                      ELSE 'available' END AS next_state,
                 attempt, started_at
            FROM cyclone_steps WHERE run_id = p_run_id AND id = p_step_id) f
   WHERE s.run_id = p_run_id AND s.id = p_step_id AND s.state = 'running'
     AND s.lease_owner = p_owner AND s.lease_generation = p_generation
  RETURNING s.state, f.attempt, f.started_at, f.error_kind, f.next_state
    INTO v_state, v_attempt, v_started_at, v_error_kind, v_next_state;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  PERFORM cyclone_record_attempt(p_run_id, p_step_id, v_attempt, v_started_at, p_owner,
                                 CASE WHEN v_error_kind = 'timeout' THEN 'timed_out'
                                      WHEN v_next_state = 'discarded' THEN 'discarded' ELSE 'retried' END,
                                 p_error, v_error_kind, p_stack);

  IF v_state = 'discarded' THEN
    PERFORM cyclone_settle_run(v_run_id);
  END IF;
  RETURN v_state;
END $$;

-- Crash recovery of one running step that its worker no longer holds, run by
-- the sweep of any client under the run lock and the step lock, re-checking
-- the condition it was picked for: two replicas sweeping the same step apply
-- the outcome once. Returns what was done: 'timeout' (attempt consumed,
-- retried after p_retry_delay_ms), 'timeout_discarded', 'reclaimed' (attempt
-- kept, claimable at once, scheduled_at untouched), 'reclaim_limit'
-- (discarded), or NULL when the step no longer needs recovery (it finished,
-- or its lease was renewed meanwhile). Each ends the attempt that held the
-- lease, and records it (record-attempt.sql).
CREATE OR REPLACE FUNCTION cyclone_recover_step(p_run_id uuid, p_step_id bigint, p_retry_delay_ms bigint)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_run_id  uuid;
  v_step    cyclone_steps%ROWTYPE;
  v_outcome text;
  v_error   text;
BEGIN
  v_run_id := cyclone_lock_run(p_run_id);
  IF v_run_id IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT * INTO v_step FROM cyclone_steps WHERE run_id = p_run_id AND id = p_step_id FOR UPDATE;
  IF v_step.state IS DISTINCT FROM 'running' THEN
    RETURN NULL;
  END IF;

  IF v_step.timeout IS NOT NULL AND v_step.started_at + v_step.timeout <= now() THEN
    -- The attempt ran out of time on the database clock: consumed, exactly as
    -- a failure the worker reports (its lease is the one we hold locked).
    v_outcome := CASE cyclone_fail_step(p_run_id, p_step_id, v_step.lease_owner, v_step.lease_generation,
                                        'Step timed out after ' || v_step.timeout || ' (recovered by the sweep)',
                                        'timeout', p_retry_delay_ms, NULL)
                   WHEN 'discarded' THEN 'timeout_discarded' ELSE 'timeout' END;
    RETURN v_outcome;
  ELSIF v_step.lease_expiry < now() THEN
    IF v_step.max_reclaims IS NOT NULL AND v_step.reclaims >= v_step.max_reclaims THEN
      -- A step that keeps killing its workers must not loop forever.
      v_outcome := 'reclaim_limit';
      UPDATE cyclone_steps
         SET state = 'discarded', finished_at = now(),
             error = 'Lease expired after ' || reclaims || ' reclaim(s); maxReclaims is ' || max_reclaims,
             error_kind = 'reclaim_limit',
             lease_owner = NULL, lease_expiry = NULL, updated_at = now()
       WHERE run_id = p_run_id AND id = p_step_id
      RETURNING error INTO v_error;
      PERFORM cyclone_record_attempt(p_run_id, p_step_id, v_step.attempt, v_step.started_at, v_step.lease_owner,
                                     'discarded', v_error, 'reclaim_limit', NULL);
      PERFORM cyclone_settle_run(v_run_id);
    ELSE
      -- A crash is not a failure: same attempt, no backoff, claimable at once
      -- (on resume, if the run is paused: keep-paused.sql).
      v_outcome := 'reclaimed';
      PERFORM cyclone_record_attempt(p_run_id, p_step_id, v_step.attempt, v_step.started_at, v_step.lease_owner,
                                     'reclaimed', NULL, NULL, NULL);
      UPDATE cyclone_steps s
         SET (state, paused_state) = (SELECT k.state, k.paused_state FROM cyclone_keep_paused(p_run_id, 'available') k),
             reclaims = s.reclaims + 1,
             lease_owner = NULL, lease_expiry = NULL, updated_at = now()
       WHERE s.run_id = p_run_id AND s.id = p_step_id;
      PERFORM pg_notify('cyclone_wake', v_step.queue);
    END IF;
    RETURN v_outcome;
  END IF;
  RETURN NULL;
END $$;

-- Cancels a run and every unfinished step of it in one transaction. Running
-- handlers learn at their next heartbeat, which no longer matches a running
-- row. Returns the run's state before the call, or NULL for an unknown run.
CREATE OR REPLACE FUNCTION cyclone_cancel_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
BEGIN
  SELECT state INTO v_state FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS NULL OR v_state IN ('completed', 'cancelled') THEN
    RETURN v_state;
  END IF;

  -- The attempt of a running step ends here: it is recorded before its row
  -- changes. The run's unfinished steps are locked first, so none becomes
  -- running (a claim takes no run lock) between the record and the update.
  PERFORM 1 FROM cyclone_steps WHERE run_id = p_run_id AND state NOT IN ('completed', 'discarded', 'cancelled') FOR UPDATE;
  PERFORM cyclone_record_attempt(run_id, id, attempt, started_at, lease_owner, 'cancelled', NULL, NULL, NULL)
     FROM cyclone_steps WHERE run_id = p_run_id AND state = 'running';

  UPDATE cyclone_steps
     SET state = 'cancelled', paused_state = NULL, lease_expiry = NULL,
         finished_at = now(), updated_at = now()
   WHERE run_id = p_run_id AND state NOT IN ('completed', 'discarded', 'cancelled');

  UPDATE cyclone_runs
     SET state = 'cancelled', updated_at = now(), finished_at = now(), delete_after = now() + retention
   WHERE id = p_run_id;
  DELETE FROM cyclone_unique_keys WHERE run_id = p_run_id;
  PERFORM pg_notify('cyclone_run_finished', p_run_id::text);
  RETURN v_state;
END $$;

-- Reopens discarded steps (one node, or all with p_node_id NULL). The retry
-- is not an attempt: max_attempts becomes the attempt it opens, so exactly
-- one more is allowed (also after a permanent error that left attempts
-- unused). A step discarded for its reclaim limit had its attempt unconsumed,
-- so it keeps the attempt and starts its reclaim count again. A reopened
-- signal wait goes back to pending, so that routing starts its wait (and its
-- timeout) again. Returns how many reopened, or -1 for an unknown run.
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
    -- Its steps can be claimed again, also when its month is below the claim's floor.
    PERFORM cyclone_lower_claim_floor(p_run_id);
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

-- Delivers a signal to the run's signal node of that name: completes it when
-- it waits, keeps it on the node when the node is not waiting yet (pending,
-- or paused). Returns 'delivered' or 'stored', or why nothing was done:
-- 'run_not_found', 'run_completed' / 'run_failed' / 'run_cancelled',
-- 'unknown_signal', 'already_signalled', 'node_discarded' (its wait timed out).
CREATE OR REPLACE FUNCTION cyclone_signal(p_run_id uuid, p_name text, p_payload jsonb) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_run_state text;
  v_step      cyclone_steps%ROWTYPE;
BEGIN
  SELECT state INTO v_run_state FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_run_state IS NULL THEN
    RETURN 'run_not_found';
  END IF;
  IF v_run_state IN ('completed', 'failed', 'cancelled') THEN
    RETURN 'run_' || v_run_state;
  END IF;
  SELECT * INTO v_step FROM cyclone_steps
   WHERE run_id = p_run_id AND node_id = p_name AND node_type = 'signal'
     FOR UPDATE;
  IF NOT FOUND THEN
    RETURN 'unknown_signal';
  END IF;
  IF v_step.signalled_at IS NOT NULL OR v_step.state = 'completed' THEN
    RETURN 'already_signalled';
  END IF;
  IF v_step.state IN ('discarded', 'cancelled') THEN
    RETURN 'node_' || v_step.state;
  END IF;

  UPDATE cyclone_steps SET signal = p_payload, signalled_at = now(), updated_at = now() WHERE run_id = p_run_id AND id = v_step.id;
  IF v_step.state <> 'waiting_signal' THEN
    RETURN 'stored';
  END IF;
  -- Routing consumes the signal it has just stored, and moves on below it.
  PERFORM cyclone_release_successors(ARRAY[p_run_id]);
  PERFORM cyclone_settle_run(p_run_id);
  RETURN 'delivered';
END $$;

-- Fires one due timer: a sleep completes (output null); a signal wait whose
-- timeout passed is discarded with error_kind 'signal_timeout', or completes
-- with output null when its node says onTimeout 'continue'. Re-checked under
-- the run lock and the step lock, so replicas firing the same timer, or a
-- signal racing the timeout, apply one outcome. Returns 'slept',
-- 'signal_timeout' or 'continued', or NULL when there was nothing to fire.
CREATE OR REPLACE FUNCTION cyclone_fire_timer(p_run_id uuid, p_step_id bigint) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_run_id  uuid;
  v_step    cyclone_steps%ROWTYPE;
  v_outcome text;
BEGIN
  v_run_id := cyclone_lock_run(p_run_id);
  IF v_run_id IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT * INTO v_step FROM cyclone_steps WHERE run_id = p_run_id AND id = p_step_id FOR UPDATE;
  IF v_step.state NOT IN ('waiting_timer', 'waiting_signal') OR v_step.wake_at IS NULL OR v_step.wake_at > now() THEN
    RETURN NULL;
  END IF;

  IF v_step.state = 'waiting_timer' THEN
    v_outcome := 'slept';
  ELSIF (SELECT graph #>> ARRAY['nodes', v_step.node_id, 'onTimeout'] FROM cyclone_runs WHERE id = v_run_id) = 'continue' THEN
    v_outcome := 'continued';
  ELSE
    v_outcome := 'signal_timeout';
  END IF;

  UPDATE cyclone_steps
     SET state       = CASE WHEN v_outcome = 'signal_timeout' THEN 'discarded' ELSE 'completed' END,
         output      = CASE WHEN v_outcome = 'signal_timeout' THEN NULL ELSE 'null'::jsonb END,
         error       = CASE WHEN v_outcome = 'signal_timeout'
                            THEN format('No signal "%s" arrived before its timeout', node_id) END,
         error_kind  = CASE WHEN v_outcome = 'signal_timeout' THEN 'signal_timeout' END,
         wake_at     = NULL,
         finished_at = now(),
         updated_at  = now()
   WHERE run_id = p_run_id AND id = p_step_id;

  PERFORM cyclone_release_successors(ARRAY[v_run_id]);
  PERFORM cyclone_settle_run(v_run_id);
  RETURN v_outcome;
END $$;

DROP FUNCTION IF EXISTS cyclone_record_nodes(uuid, text, text, bigint, jsonb, integer, boolean, text[], integer);
DROP FUNCTION IF EXISTS cyclone_deliver_results(uuid[]);
DROP FUNCTION IF EXISTS cyclone_run_output(uuid);
DROP FUNCTION IF EXISTS cyclone_run_failure(uuid);
DROP FUNCTION IF EXISTS cyclone_wake_workflows(uuid[]);
DROP FUNCTION IF EXISTS cyclone_load_history(uuid, text, text, bigint);
DROP FUNCTION IF EXISTS cyclone_claim_workflows(text, text[], integer[], integer, text, bigint);
DROP FUNCTION IF EXISTS cyclone_start_code_workflow(uuid, text, integer, jsonb, text, smallint, text, bigint, integer,
                                                    integer, bigint, bigint[], jsonb, uuid);

DROP INDEX IF EXISTS cyclone_steps_workflows;
DROP INDEX IF EXISTS cyclone_runs_parent;
ALTER TABLE cyclone_attempts DROP CONSTRAINT cyclone_attempts_outcome_check;
ALTER TABLE cyclone_attempts ADD CONSTRAINT cyclone_attempts_outcome_check
  CHECK (outcome IN ('retried', 'discarded', 'timed_out', 'cancelled', 'reclaimed', 'snoozed'));
ALTER TABLE cyclone_steps DROP CONSTRAINT cyclone_steps_node_type_check;
ALTER TABLE cyclone_steps ADD CONSTRAINT cyclone_steps_node_type_check CHECK (node_type IN ('step', 'signal', 'sleep'));
ALTER TABLE cyclone_steps DROP COLUMN input, DROP COLUMN observed, DROP COLUMN wake_delay_ms;
ALTER TABLE cyclone_runs DROP COLUMN version, DROP COLUMN parent_id;

DELETE FROM cyclone_schema_migrations WHERE version = 13;
