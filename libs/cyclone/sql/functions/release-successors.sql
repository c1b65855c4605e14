-- Routing. Pending nodes of the given runs whose upstream nodes are all
-- completed move on: a step becomes available, a sleep starts its timer, a
-- signal wait starts waiting (with its timeout). A signal wait whose signal
-- already arrived completes at once with it, which may release further nodes,
-- hence the loop. In a paused run nodes arrive paused. Queues that gained an
-- available step are woken. Callers hold the runs' locks.
--
-- A code workflow has no graph to route: its nodes are made by its method as
-- it runs. A finish there wakes the workflow if it waits on that node
-- (wake-workflows.sql); a signal that arrived for a wait it has reached is
-- taken here as in a DAG run.
--
-- A standalone job is a run of one node with nothing to route: every
-- completion batch calls this, so such runs are left out first, by one key
-- lookup each. The months before the oldest run are left out
-- (live-months.sql).
-- Its plans are kept, joins by key, for every caller (see complete-steps.sql).
CREATE OR REPLACE FUNCTION cyclone_release_successors(p_run_ids uuid[]) RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET jit = off
AS $$
DECLARE
  v_lo       uuid := cyclone_lowest_id(p_run_ids);
  v_runs     uuid[];
  v_code     uuid[];
  v_woken    text[];
  v_consumed integer;
BEGIN
  SELECT coalesce(array_agg(id), '{}'), array_agg(id) FILTER (WHERE version IS NOT NULL) INTO v_runs, v_code
    FROM cyclone_runs WHERE id = ANY (p_run_ids) AND id >= v_lo AND workflow IS NOT NULL;
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
       WHERE s.run_id = ANY (v_runs) AND s.run_id >= v_lo AND r.version IS NULL
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
  IF v_code IS NOT NULL THEN
    PERFORM cyclone_wake_workflows(v_code);
  END IF;
END $$;
