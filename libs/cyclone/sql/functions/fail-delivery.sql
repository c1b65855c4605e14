-- A message delivered more than maxDeliveries times: its step fails an
-- attempt with error_kind 'max_deliveries', and its retry policy applies
-- (cyclone_fail_step). Its consumers died with it each time (seed 004, step
-- 6), so the step is running under an expired lease or, when they died
-- before starting it, available; one of them is started under this owner
-- first, so the attempt is recorded like any other. A step that is running
-- under a live lease, or no longer startable, is left alone (NULL).
CREATE OR REPLACE FUNCTION cyclone_fail_delivery(p_run_id uuid, p_step_id bigint, p_owner text, p_error text,
                                                 p_retry_delay_ms bigint)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_step cyclone_steps%ROWTYPE;
BEGIN
  IF cyclone_lock_run(p_run_id) IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT * INTO v_step FROM cyclone_steps WHERE run_id = p_run_id AND id = p_step_id FOR UPDATE;
  IF v_step.state = 'available' OR (v_step.state = 'running' AND v_step.lease_expiry < now()) THEN
    UPDATE cyclone_steps
       SET state = 'running', lease_owner = p_owner, lease_generation = lease_generation + 1,
           lease_expiry = now(), started_at = coalesce(CASE WHEN v_step.state = 'running' THEN started_at END, now()),
           updated_at = now()
     WHERE run_id = p_run_id AND id = p_step_id
    RETURNING * INTO v_step;
    RETURN cyclone_fail_step(p_run_id, p_step_id, p_owner, v_step.lease_generation, p_error, 'max_deliveries',
                             p_retry_delay_ms);
  END IF;
  RETURN NULL;
END $$;
