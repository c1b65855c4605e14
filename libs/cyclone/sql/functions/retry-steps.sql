-- Reopens discarded steps (one node, or all with p_node_id NULL). The retry
-- is not an attempt: max_attempts becomes the attempt it opens, so exactly
-- one more is allowed (also after a permanent error that left attempts
-- unused). A step discarded for its reclaim limit had its attempt unconsumed,
-- so it keeps the attempt and starts its reclaim count again. A reopened
-- signal wait goes back to pending, so that routing starts its wait (and its
-- timeout) again. Returns how many reopened, or -1 for an unknown run.
CREATE OR REPLACE FUNCTION cyclone_retry_steps(p_run_id uuid, p_node_id text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
  v_count integer;
BEGIN
  SELECT state INTO v_state FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS NULL THEN
    RETURN -1;
  END IF;
  IF v_state = 'cancelled' THEN
    RETURN 0;
  END IF;

  UPDATE cyclone_steps
     SET state        = CASE WHEN v_state = 'paused' THEN 'paused' WHEN node_type = 'step' THEN 'available'
                             ELSE 'pending' END,
         paused_state = CASE WHEN v_state = 'paused' THEN
                          CASE WHEN node_type = 'step' THEN 'available' ELSE 'pending' END END,
         attempt      = CASE WHEN error_kind = 'reclaim_limit' THEN attempt ELSE attempt + 1 END,
         max_attempts = CASE WHEN error_kind = 'reclaim_limit' THEN attempt ELSE attempt + 1 END,
         reclaims     = CASE WHEN error_kind = 'reclaim_limit' THEN 0 ELSE reclaims END,
         error = NULL, error_kind = NULL, finished_at = NULL,
         scheduled_at = now(), updated_at = now()
   WHERE run_id = p_run_id AND state = 'discarded' AND (p_node_id IS NULL OR node_id = p_node_id);
  GET DIAGNOSTICS v_count = ROW_COUNT;

  IF v_count > 0 AND v_state = 'failed' THEN
    UPDATE cyclone_runs
       SET state = 'running', updated_at = now(), finished_at = NULL, delete_after = NULL
     WHERE id = p_run_id;
    -- Its steps can be claimed again, also when its month is below the claim's floor.
    PERFORM cyclone_lower_claim_floor(p_run_id);
    -- The run is unfinished again and takes its unique key back: a unique
    -- violation when another run took it meanwhile, which undoes the retry.
    INSERT INTO cyclone_unique_keys (unique_key, run_id)
    SELECT unique_key, id FROM cyclone_runs WHERE id = p_run_id AND unique_key IS NOT NULL;
  END IF;
  IF v_count > 0 THEN
    PERFORM pg_notify('cyclone_wake', queue) FROM cyclone_runs WHERE id = p_run_id;
    -- A reopened signal wait waits again, with its full timeout.
    PERFORM cyclone_release_successors(ARRAY[p_run_id]);
  END IF;
  RETURN v_count;
END $$;
