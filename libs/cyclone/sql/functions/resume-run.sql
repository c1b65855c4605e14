-- Resumes a paused run: paused nodes return to their prior state, nodes whose
-- upstreams completed meanwhile move on, signals that arrived meanwhile are
-- consumed, timers that came due fire at the next tick, and the run settles
-- (it may have finished or failed while paused). Returns the run's state
-- before the call, or NULL for an unknown run.
CREATE OR REPLACE FUNCTION cyclone_resume_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
  v_woken text[];
BEGIN
  SELECT state INTO v_state FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS DISTINCT FROM 'paused' THEN
    RETURN v_state;
  END IF;
  UPDATE cyclone_runs SET state = 'running', updated_at = now() WHERE id = p_run_id;
  -- The queues to wake come from the restored rows: a lookup by run id and
  -- state = 'available' would match the claim index's predicate, and the
  -- planner could scan that index, backlog and all, instead of the run's rows.
  WITH restored AS (
    UPDATE cyclone_steps
       SET state = paused_state, paused_state = NULL, updated_at = now()
     WHERE run_id = p_run_id AND state = 'paused'
    RETURNING queue, state
  )
  SELECT array_agg(DISTINCT queue) FILTER (WHERE state = 'available') INTO v_woken FROM restored;
  PERFORM pg_notify('cyclone_wake', queue) FROM unnest(v_woken) AS queue;
  PERFORM cyclone_release_successors(ARRAY[p_run_id]);
  PERFORM cyclone_settle_run(p_run_id);
  RETURN v_state;
END $$;
