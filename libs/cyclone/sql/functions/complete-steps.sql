-- Completes many steps of one worker, each named by its run and its id
-- (arrays in the same order): a compare-and-set on each step's lease
-- (owner, generation, and the timeout on the database clock), so a late or
-- duplicate completion changes nothing. The runs are locked first; routing
-- and the runs' state changes commit with the steps. Returns the id and
-- generation of each step it completed. A single completion is a batch of
-- one: there is one completion path.
--
-- A standalone job kept for no time (retention 0) is deleted here with its
-- run, its attempts and its unique key, in place of being updated: nothing
-- of it is written twice and no sweep comes back for it, so a queue of such
-- jobs leaves the vacuum one dead row a table a job. Not when a caller waits
-- for its result (notify_finish), nor when a code workflow waits for it as
-- its child: those are kept as cyclone_kept_for says (kept-for.sql).
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
--
-- PostgreSQL 18 loses rows from such a join (its inner side a partitioned
-- table pruned for each outer row) when it rechecks a row that was changed
-- while it waited for it: that row and every one after it are dropped,
-- silently (15.18 returns them all). A heartbeat of a step, or a cancel
-- of a run, committing at that moment is enough. So what the lock missed is
-- locked again by id (the rows after the one rechecked: still in id order),
-- and steps a pass left running are tried once more; a second pass meets
-- committed rows and does not wait. Both only run when something was missed.
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
  v_locked uuid[];
  v_missed uuid[];
  v_pass   integer;
  v_prun   uuid[];
  v_pids   bigint[];
  v_pgens  bigint[];
BEGIN
  -- The runs' locks first, in id order (cyclone_lock_runs, here so its plan is kept too). The
  -- runs are joined by key, here and in the delete below: with `id = ANY` the kept plan read a
  -- month of retention 0, whose statistics show it nearly empty, through another index from
  -- the batch's oldest id on, past every run deleted since (745 buffers under a held snapshot).
  SELECT array_agg(r.id) FILTER (WHERE r.drop), array_agg(r.id) INTO v_drop, v_locked
    FROM (SELECT r.id, r.retention = interval '0' AND r.workflow IS NULL AND NOT r.notify_finish AND r.parent_id IS NULL
                   AND r.state IN ('running', 'paused') AS drop
            FROM (SELECT DISTINCT u AS id FROM unnest(p_run_ids) AS u) t JOIN cyclone_runs r ON r.id = t.id
           WHERE r.id >= v_lo ORDER BY r.id FOR UPDATE OF r) r;
  IF coalesce(cardinality(v_locked), 0) < cardinality(p_run_ids) THEN
    v_missed := ARRAY(SELECT unnest(p_run_ids) EXCEPT SELECT unnest(v_locked));
  END IF;
  -- Locked, not deleted here: a run kept for no time among them completes
  -- and goes with the next retention sweep.
  IF cardinality(v_missed) > 0 THEN
    PERFORM 1 FROM cyclone_runs r WHERE r.id = ANY (v_missed) AND r.id >= v_lo ORDER BY r.id FOR UPDATE;
  END IF;

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
      DELETE FROM cyclone_runs r USING unnest(v_drop) AS t(id) WHERE r.id = t.id AND r.id >= v_lo
      RETURNING r.id, r.unique_key
    )
    DELETE FROM cyclone_unique_keys k USING runs WHERE runs.unique_key IS NOT NULL AND k.unique_key = runs.unique_key AND k.run_id = runs.id;
  END IF;

  -- Every step of the batch deleted (a queue of such jobs): nothing is left
  -- to update, and looking each one up again costs as much as the delete.
  IF cardinality(v_ids) = cardinality(p_ids) THEN
    RETURN QUERY SELECT * FROM unnest(v_ids, v_gens);
    RETURN;
  END IF;

  -- A second pass only when the first left some of the batch: stale
  -- completions (a lost lease), which it leaves again, or rows a recheck
  -- dropped (above).
  v_ids := coalesce(v_ids, '{}');
  v_gens := coalesce(v_gens, '{}');
  FOR v_pass IN 1..2 LOOP
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
    SELECT array_agg(c.run_id), array_agg(c.id), array_agg(c.lease_generation) INTO v_prun, v_pids, v_pgens FROM completed c;
    v_runs := v_runs || v_prun;
    v_ids := v_ids || v_pids;
    v_gens := v_gens || v_pgens;
    EXIT WHEN cardinality(v_ids) >= cardinality(p_ids);
  END LOOP;
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
