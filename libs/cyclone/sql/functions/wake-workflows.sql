-- Wakes code workflows that are waiting (a pass suspended them, see
-- record-nodes.sql) once one of the nodes they wait on has finished, or is
-- an inline call whose retry came due: their node becomes available (paused
-- in a paused run, where it goes on at resume), and their queues are woken.
-- A workflow already available or running is left as it is: the pass that is
-- coming, or the one under way, sees the finish when it suspends. So finishes
-- that arrive together, or during a pass, make at most one more pass.
--
-- A pass that found nothing to do (its method still waited on the rest, as
-- a Promise.all of a thousand steps does) set its node's wake_delay_ms, which
-- doubles while passes keep finding nothing: its next pass starts that long
-- after the wake-up, so the finishes of that time are taken in one pass. A
-- workflow waiting on a thousand steps is replayed a few times, not a
-- thousand; one that moves on at each wake-up has no delay. Callers hold the runs' locks, or (deliver-results.sql) the lock
-- of a child of theirs; the workflow's node is found by its id, the
-- workflow's name, so the run's other nodes are read only to find one that
-- finished.
-- Its plans are kept, joins by key, for every caller (see complete-steps.sql).
-- Without partition pruning, for the reason deliver-results.sql gives.
CREATE OR REPLACE FUNCTION cyclone_wake_workflows(p_run_ids uuid[]) RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET jit = off
SET enable_partition_pruning = off
AS $$
DECLARE
  v_lo    uuid := cyclone_lowest_id(p_run_ids);
  v_woken text[];
BEGIN
  WITH woken AS (
    UPDATE cyclone_steps w
       SET state = CASE WHEN w.state = 'paused' THEN 'paused' ELSE 'available' END,
           paused_state = CASE WHEN w.state = 'paused' THEN 'available' END,
           depends_on = '{}', scheduled_at = now() + coalesce(w.wake_delay_ms, 0) * interval '1 millisecond',
           updated_at = now()
      FROM cyclone_runs r
     WHERE r.id = ANY (p_run_ids) AND r.id >= v_lo AND r.version IS NOT NULL
       AND w.run_id = r.id AND w.run_id >= v_lo AND w.node_id = r.workflow
       AND (w.state = 'pending' OR (w.state = 'paused' AND w.paused_state = 'pending'))
       AND EXISTS (SELECT 1 FROM cyclone_steps u
                    WHERE u.run_id = w.run_id AND u.run_id >= v_lo AND u.node_id = ANY (w.depends_on)
                      AND (u.state IN ('completed', 'discarded', 'cancelled') OR (u.node_type = 'run' AND u.state = 'pending')))
    RETURNING w.queue, w.state, w.wake_delay_ms
  )
  -- A delayed pass is found by the poll once due (or by the sweep's re-wake).
  SELECT array_agg(DISTINCT queue) INTO v_woken FROM woken WHERE state = 'available' AND coalesce(wake_delay_ms, 0) = 0;
  PERFORM pg_notify('cyclone_wake', queue) FROM unnest(v_woken) AS queue;
END $$;
