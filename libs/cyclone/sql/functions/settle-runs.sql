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
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET jit = off
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
       SET state = next.state, updated_at = now(), finished_at = now(),
           delete_after = now() + cyclone_kept_for(r.retention, next.state, r.notify_finish)
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
