-- Restores the completion, settling and cancelling as version 16 defined them: every finished run kept for its retention.

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
  v_child  uuid[];
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
  -- A job a code workflow started as its child tells its parent.
  WITH finished AS (
    UPDATE cyclone_runs r
       SET state = 'completed', updated_at = now(), finished_at = now(), delete_after = now() + r.retention
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
--
-- A code workflow's run is its method's: it completes when the workflow's
-- node completes (its output is the run's), and fails when that node is
-- discarded, whatever its other nodes are doing; only that node is read, not
-- the thousand steps of a fan-out. What its method left unfinished (a step it
-- never awaited, a wait) is cancelled with it. A run started by a code
-- workflow's wf.startChild tells its parent it finished (deliver-results.sql).

-- Its plans are kept, joins by key, for every caller (see complete-steps.sql).
CREATE OR REPLACE FUNCTION cyclone_settle_runs(p_run_ids uuid[]) RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off
AS $$
DECLARE
  v_lo       uuid := cyclone_lowest_id(p_run_ids);
  v_notify   uuid[];
  v_code     uuid[];
  v_children uuid[];
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
       AND r.version IS NULL
     GROUP BY r.id, r.state
    UNION ALL
    SELECT r.id,
           CASE
             WHEN w.state = 'completed' THEN 'completed'
             WHEN r.state = 'running' AND w.state = 'discarded' THEN 'failed'
           END
      FROM cyclone_runs r
      JOIN cyclone_steps w ON w.run_id = r.id AND w.node_id = r.workflow
     WHERE r.id = ANY (p_run_ids) AND r.id >= v_lo AND w.run_id >= v_lo AND r.state IN ('running', 'paused')
       AND r.version IS NOT NULL
  ), settled AS (
    UPDATE cyclone_runs r
       SET state = next.state, updated_at = now(), finished_at = now(), delete_after = now() + r.retention
      FROM next
     WHERE r.id = next.id AND r.id >= v_lo AND next.state IS NOT NULL
    RETURNING r.id, r.notify_finish, r.unique_key, r.version, r.parent_id
  ), freed AS (
    -- A finished run gives its unique key up.
    DELETE FROM cyclone_unique_keys k
     USING settled
     WHERE settled.unique_key IS NOT NULL AND k.unique_key = settled.unique_key AND k.run_id = settled.id
  )
  SELECT array_agg(settled.id) FILTER (WHERE settled.notify_finish),
         array_agg(settled.id) FILTER (WHERE settled.version IS NOT NULL),
         array_agg(settled.id) FILTER (WHERE settled.parent_id IS NOT NULL)
    INTO v_notify, v_code, v_children FROM settled;
  IF v_code IS NOT NULL THEN
    UPDATE cyclone_steps
       SET state = 'cancelled', paused_state = NULL, lease_expiry = NULL, finished_at = now(), updated_at = now()
     WHERE run_id = ANY (v_code) AND run_id >= v_lo AND state NOT IN ('completed', 'discarded', 'cancelled');
  END IF;
  IF v_children IS NOT NULL THEN
    PERFORM cyclone_deliver_results(v_children);
  END IF;
  PERFORM pg_notify('cyclone_run_finished', finished_id::text) FROM unnest(v_notify) AS finished_id;
END $$;

-- One run, for the transitions that settle a single run; returns its state.
CREATE OR REPLACE FUNCTION cyclone_settle_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM cyclone_settle_runs(ARRAY[p_run_id]);
  RETURN (SELECT state FROM cyclone_runs WHERE id = p_run_id);
END $$;

-- Cancels a run and every unfinished step of it in one transaction. Running
-- handlers learn at their next heartbeat, which no longer matches a running
-- row. Returns the run's state before the call, or NULL for an unknown run.
--
-- The runs a code workflow started (wf.startChild) are cancelled with it,
-- theirs with them, in the same transaction. The run is marked cancelled
-- first, so its children, as they go, do not complete its waits for them;
-- and they go before any of its rows is written, so a child settling at
-- that moment, which holds its own lock and then writes rows of this run
-- (deliver-results.sql), never waits for this transaction while this one
-- waits for it. A child cancelled on its own tells a parent that waits for it.
CREATE OR REPLACE FUNCTION cyclone_cancel_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state  text;
  v_parent uuid;
BEGIN
  SELECT state, parent_id INTO v_state, v_parent FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS NULL OR v_state IN ('completed', 'cancelled') THEN
    RETURN v_state;
  END IF;

  UPDATE cyclone_runs
     SET state = 'cancelled', updated_at = now(), finished_at = now(), delete_after = now() + retention
   WHERE id = p_run_id;
  PERFORM cyclone_cancel_run(c.id) FROM cyclone_runs c
    WHERE c.parent_id = p_run_id AND c.state NOT IN ('completed', 'failed', 'cancelled')
    ORDER BY c.id;

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
  DELETE FROM cyclone_unique_keys WHERE run_id = p_run_id;
  IF v_parent IS NOT NULL THEN
    PERFORM cyclone_deliver_results(ARRAY[p_run_id]);
  END IF;
  PERFORM pg_notify('cyclone_run_finished', p_run_id::text);
  RETURN v_state;
END $$;

DROP FUNCTION IF EXISTS cyclone_kept_for(interval, text, boolean);

DELETE FROM cyclone_schema_migrations WHERE version = 17;
