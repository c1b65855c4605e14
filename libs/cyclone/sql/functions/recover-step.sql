-- Crash recovery of one running step that its worker no longer holds, run by
-- the sweep of any client under the run lock and the step lock, re-checking
-- the condition it was picked for: two replicas sweeping the same step apply
-- the outcome once. Returns what was done: 'timeout' (attempt consumed,
-- retried after p_retry_delay_ms), 'timeout_discarded', 'reclaimed' (attempt
-- kept, claimable at once, scheduled_at untouched), 'reclaim_limit'
-- (discarded), or NULL when the step no longer needs recovery (it finished,
-- or its lease was renewed meanwhile). Each ends the attempt that held the
-- lease, and records it (record-attempt.sql).
CREATE OR REPLACE FUNCTION cyclone_recover_step(p_run_id uuid, p_step_id bigint, p_retry_delay_ms bigint)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_run_id  uuid;
  v_step    cyclone_steps%ROWTYPE;
  v_outcome text;
  v_error   text;
BEGIN
  v_run_id := cyclone_lock_run(p_run_id);
  IF v_run_id IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT * INTO v_step FROM cyclone_steps WHERE run_id = p_run_id AND id = p_step_id FOR UPDATE;
  IF v_step.state IS DISTINCT FROM 'running' THEN
    RETURN NULL;
  END IF;

  IF v_step.timeout IS NOT NULL AND v_step.started_at + v_step.timeout <= now() THEN
    -- The attempt ran out of time on the database clock: consumed, exactly as
    -- a failure the worker reports (its lease is the one we hold locked).
    v_outcome := CASE cyclone_fail_step(p_run_id, p_step_id, v_step.lease_owner, v_step.lease_generation,
                                        'Step timed out after ' || v_step.timeout || ' (recovered by the sweep)',
                                        'timeout', p_retry_delay_ms, NULL)
                   WHEN 'discarded' THEN 'timeout_discarded' ELSE 'timeout' END;
    RETURN v_outcome;
  ELSIF v_step.lease_expiry < now() THEN
    IF v_step.max_reclaims IS NOT NULL AND v_step.reclaims >= v_step.max_reclaims THEN
      -- A step that keeps killing its workers must not loop forever.
      v_outcome := 'reclaim_limit';
      UPDATE cyclone_steps
         SET state = 'discarded', finished_at = now(),
             error = 'Lease expired after ' || reclaims || ' reclaim(s); maxReclaims is ' || max_reclaims,
             error_kind = 'reclaim_limit',
             lease_owner = NULL, lease_expiry = NULL, updated_at = now()
       WHERE run_id = p_run_id AND id = p_step_id
      RETURNING error INTO v_error;
      PERFORM cyclone_record_attempt(p_run_id, p_step_id, v_step.attempt, v_step.started_at, v_step.lease_owner,
                                     'discarded', v_error, 'reclaim_limit', NULL);
      PERFORM cyclone_release_successors(ARRAY[v_run_id]);
      PERFORM cyclone_settle_run(v_run_id);
    ELSE
      -- A crash is not a failure: same attempt, no backoff, claimable at once
      -- (on resume, if the run is paused: keep-paused.sql).
      v_outcome := 'reclaimed';
      PERFORM cyclone_record_attempt(p_run_id, p_step_id, v_step.attempt, v_step.started_at, v_step.lease_owner,
                                     'reclaimed', NULL, NULL, NULL);
      UPDATE cyclone_steps s
         SET (state, paused_state) = (SELECT k.state, k.paused_state FROM cyclone_keep_paused(p_run_id, 'available') k),
             reclaims = s.reclaims + 1,
             lease_owner = NULL, lease_expiry = NULL, updated_at = now()
       WHERE s.run_id = p_run_id AND s.id = p_step_id;
      PERFORM pg_notify('cyclone_wake', v_step.queue);
    END IF;
    RETURN v_outcome;
  END IF;
  RETURN NULL;
END $$;
