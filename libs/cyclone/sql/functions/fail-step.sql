-- A failed attempt: consumed, then retried after the step's own backoff for
-- that attempt (backoff_ms, stored when the step was written by a client
-- that runs its kind), else after p_retry_delay_ms, or, when attempts are
-- exhausted or the error is permanent, discarded. So a replica that does not
-- run the kind (its sweep consumes a timed-out attempt) applies the kind's
-- backoff all the same. An attempt
-- whose timeout elapsed on the database clock is recorded as a timeout
-- whatever the handler threw. A retry of a paused run's step is paused
-- (keep-paused.sql). A compare-and-set on the lease, under the run lock.
-- The attempt is recorded (record-attempt.sql) with the error's stack, when
-- the handler threw one: retried, discarded, or timed_out whatever followed.
-- A discarded step wakes the code workflow waiting on it (its method gets a
-- StepFailedError), then settles the run. Returns the step's new state, or
-- NULL when the lease was lost.
CREATE OR REPLACE FUNCTION cyclone_fail_step(p_run_id uuid, p_step_id bigint, p_owner text, p_generation bigint,
                                             p_error text, p_error_kind text, p_retry_delay_ms bigint,
                                             p_stack text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_run_id     uuid;
  v_state      text;
  -- The ended attempt, as the step held it.
  v_attempt    integer;
  v_started_at timestamptz;
  v_error_kind text;
  v_next_state text;
BEGIN
  v_run_id := cyclone_lock_run(p_run_id);
  IF v_run_id IS NULL THEN
    RETURN NULL;
  END IF;

  UPDATE cyclone_steps s
     SET (state, paused_state) = (SELECT k.state, k.paused_state FROM cyclone_keep_paused(p_run_id, f.next_state) k),
         attempt      = CASE WHEN f.next_state = 'discarded' THEN s.attempt ELSE s.attempt + 1 END,
         scheduled_at = CASE WHEN f.next_state = 'discarded' THEN s.scheduled_at
                             ELSE now() + COALESCE(s.backoff_ms[s.attempt], p_retry_delay_ms)
                                          * interval '1 millisecond' END,
         finished_at  = CASE WHEN f.next_state = 'discarded' THEN now() END,
         error        = p_error,
         error_kind   = f.error_kind,
         lease_owner  = NULL,
         lease_expiry = NULL,
         updated_at   = now()
    FROM (SELECT CASE WHEN timeout IS NOT NULL AND started_at + timeout <= now() THEN 'timeout'
                      ELSE p_error_kind END AS error_kind,
                 CASE WHEN p_error_kind = 'permanent' OR attempt >= max_attempts THEN 'discarded'
                      ELSE 'available' END AS next_state,
                 attempt, started_at
            FROM cyclone_steps WHERE run_id = p_run_id AND id = p_step_id) f
   WHERE s.run_id = p_run_id AND s.id = p_step_id AND s.state = 'running'
     AND s.lease_owner = p_owner AND s.lease_generation = p_generation
  RETURNING s.state, f.attempt, f.started_at, f.error_kind, f.next_state
    INTO v_state, v_attempt, v_started_at, v_error_kind, v_next_state;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  PERFORM cyclone_record_attempt(p_run_id, p_step_id, v_attempt, v_started_at, p_owner,
                                 CASE WHEN v_error_kind = 'timeout' THEN 'timed_out'
                                      WHEN v_next_state = 'discarded' THEN 'discarded' ELSE 'retried' END,
                                 p_error, v_error_kind, p_stack);

  IF v_state = 'discarded' THEN
    PERFORM cyclone_release_successors(ARRAY[v_run_id]);
    PERFORM cyclone_settle_run(v_run_id);
  END IF;
  RETURN v_state;
END $$;
