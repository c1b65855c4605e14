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
