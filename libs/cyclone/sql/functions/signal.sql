-- Delivers a signal to the run's signal node of that name: completes it when
-- it waits, keeps it on the node when the node is not waiting yet (pending,
-- or paused). Returns 'delivered' or 'stored', or why nothing was done:
-- 'run_not_found', 'run_completed' / 'run_failed' / 'run_cancelled',
-- 'unknown_signal', 'already_signalled', 'node_discarded' (its wait timed out).
--
-- A code workflow makes its waits as its method reaches them: a signal for
-- one it has not reached yet is kept on the workflow's own node (signal, a
-- map by name) and taken when the method gets there (record-nodes.sql).
CREATE OR REPLACE FUNCTION cyclone_signal(p_run_id uuid, p_name text, p_payload jsonb) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_run_state text;
  v_workflow  text;
  v_version   integer;
  v_step      cyclone_steps%ROWTYPE;
BEGIN
  SELECT state, workflow, version INTO v_run_state, v_workflow, v_version FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_run_state IS NULL THEN
    RETURN 'run_not_found';
  END IF;
  IF v_run_state IN ('completed', 'failed', 'cancelled') THEN
    RETURN 'run_' || v_run_state;
  END IF;
  SELECT * INTO v_step FROM cyclone_steps WHERE run_id = p_run_id AND node_id = p_name FOR UPDATE;
  IF NOT FOUND AND v_version IS NOT NULL THEN
    UPDATE cyclone_steps
       SET signal = coalesce(signal, '{}') || jsonb_build_object(p_name, p_payload), updated_at = now()
     WHERE run_id = p_run_id AND node_id = v_workflow AND NOT coalesce(signal ? p_name, false);
    RETURN CASE WHEN FOUND THEN 'stored' ELSE 'already_signalled' END;
  END IF;
  IF v_step.node_type IS DISTINCT FROM 'signal' THEN
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
