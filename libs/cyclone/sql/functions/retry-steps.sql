-- Reopens discarded steps (one node, or all with p_node_id NULL). The retry
-- is not an attempt: max_attempts becomes the attempt it opens, so exactly
-- one more is allowed (also after a permanent error that left attempts
-- unused). A step discarded for its reclaim limit had its attempt unconsumed,
-- so it keeps the attempt and starts its reclaim count again. A reopened
-- signal wait goes back to pending, so that routing starts its wait (and its
-- timeout) again. Returns how many reopened, or -1 for an unknown run.
--
-- A code workflow's failure is its method's: its nodes are the method's to
-- handle, and one it has already seen fail is part of what its replays must
-- repeat. So a code workflow is retried only once its own node is discarded
-- (else nothing is reopened), and the retry reopens that node too, with the
-- nodes its failure cancelled: its method runs again from the top, replays
-- what stands, and meets the reopened nodes as not finished yet (a wait
-- waits again, an inline call runs again). Reopened nodes lose their place
-- in the order the method learns of results, to get a new one when they
-- finish (load-history.sql).
CREATE OR REPLACE FUNCTION cyclone_retry_steps(p_run_id uuid, p_node_id text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_state    text;
  v_workflow text;
  v_code     boolean;
  v_count    integer;
  v_woken    text[];
BEGIN
  SELECT state, workflow, version IS NOT NULL INTO v_state, v_workflow, v_code FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS NULL THEN
    RETURN -1;
  END IF;
  IF v_state = 'cancelled' THEN
    RETURN 0;
  END IF;
  IF v_code AND NOT EXISTS (SELECT 1 FROM cyclone_steps
                             WHERE run_id = p_run_id AND node_id = v_workflow AND state = 'discarded') THEN
    RETURN 0;
  END IF;

  WITH reopened AS (
    UPDATE cyclone_steps
       SET state        = CASE WHEN v_state = 'paused' THEN 'paused' WHEN node_type IN ('step', 'workflow') THEN 'available'
                               ELSE 'pending' END,
           paused_state = CASE WHEN v_state = 'paused' THEN
                            CASE WHEN node_type IN ('step', 'workflow') THEN 'available' ELSE 'pending' END END,
           attempt      = CASE WHEN state = 'cancelled' OR error_kind = 'reclaim_limit' THEN attempt ELSE attempt + 1 END,
           max_attempts = CASE WHEN state = 'cancelled' THEN max_attempts
                               WHEN error_kind = 'reclaim_limit' THEN attempt ELSE attempt + 1 END,
           reclaims     = CASE WHEN error_kind = 'reclaim_limit' THEN 0 ELSE reclaims END,
           depends_on   = CASE WHEN node_type = 'workflow' THEN '{}' ELSE depends_on END,
           error = NULL, error_kind = NULL, finished_at = NULL, observed = NULL,
           scheduled_at = now(), updated_at = now()
     WHERE run_id = p_run_id
       AND ((state = 'discarded' AND (p_node_id IS NULL OR node_id = p_node_id OR (v_code AND node_id = v_workflow)))
            OR (v_code AND state = 'cancelled'))
    RETURNING queue, state
  )
  SELECT count(*), array_agg(DISTINCT queue) FILTER (WHERE state = 'available') INTO v_count, v_woken FROM reopened;

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
    PERFORM pg_notify('cyclone_wake', queue) FROM unnest(v_woken) AS queue;
    -- A reopened signal wait waits again, with its full timeout.
    PERFORM cyclone_release_successors(ARRAY[p_run_id]);
  END IF;
  RETURN v_count;
END $$;
