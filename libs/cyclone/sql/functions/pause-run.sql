-- Pauses a running run: its pending, available and waiting nodes become
-- paused, keeping the state they return to. Running steps finish; nothing
-- below them moves until resume. Returns the run's state before the call, or
-- NULL for an unknown run.
CREATE OR REPLACE FUNCTION cyclone_pause_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
BEGIN
  SELECT state INTO v_state FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS DISTINCT FROM 'running' THEN
    RETURN v_state;
  END IF;
  UPDATE cyclone_steps
     SET paused_state = state, state = 'paused', updated_at = now()
   WHERE run_id = p_run_id AND state IN ('pending', 'available', 'waiting_signal', 'waiting_timer');
  UPDATE cyclone_runs SET state = 'paused', updated_at = now() WHERE id = p_run_id;
  RETURN v_state;
END $$;
