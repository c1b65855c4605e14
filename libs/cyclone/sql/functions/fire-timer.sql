-- Fires one due timer: a sleep completes (output null); a signal wait whose
-- timeout passed is discarded with error_kind 'signal_timeout', or completes
-- with output null when its node says onTimeout 'continue'. Re-checked under
-- the run lock and the step lock, so replicas firing the same timer, or a
-- signal racing the timeout, apply one outcome. The timer of a code
-- workflow's inline call (wf.run) in its retry's backoff makes the call due
-- again (pending), for the workflow to run it. Returns 'slept',
-- 'signal_timeout', 'continued' or 'retry_due', or NULL when there was
-- nothing to fire.
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

  IF v_step.node_type = 'run' THEN
    UPDATE cyclone_steps SET state = 'pending', wake_at = NULL, updated_at = now()
     WHERE run_id = p_run_id AND id = p_step_id;
    PERFORM cyclone_release_successors(ARRAY[v_run_id]);
    RETURN 'retry_due';
  ELSIF v_step.state = 'waiting_timer' THEN
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
