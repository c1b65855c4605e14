-- A snoozed step returns to available after a delay without consuming an
-- attempt; a compare-and-set on the lease, under the run lock like every
-- transition, so that it cannot slip past a pause in progress: a paused
-- run's step is paused instead (keep-paused.sql). The attempt is recorded as
-- snoozed (record-attempt.sql); the next one runs with the same number.
CREATE OR REPLACE FUNCTION cyclone_snooze_step(p_run_id uuid, p_step_id bigint, p_owner text, p_generation bigint,
                                               p_delay_ms bigint)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_attempt    integer;
  v_started_at timestamptz;
BEGIN
  IF cyclone_lock_run(p_run_id) IS NULL THEN
    RETURN false;
  END IF;
  UPDATE cyclone_steps s
     SET (state, paused_state) = (SELECT k.state, k.paused_state FROM cyclone_keep_paused(p_run_id, 'available') k),
         scheduled_at = now() + p_delay_ms * interval '1 millisecond',
         lease_owner = NULL, lease_expiry = NULL, updated_at = now()
   WHERE s.run_id = p_run_id AND s.id = p_step_id AND s.state = 'running'
     AND s.lease_owner = p_owner AND s.lease_generation = p_generation
  RETURNING s.attempt, s.started_at INTO v_attempt, v_started_at;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM cyclone_record_attempt(p_run_id, p_step_id, v_attempt, v_started_at, p_owner, 'snoozed', NULL, NULL, NULL);
  RETURN true;
END $$;
