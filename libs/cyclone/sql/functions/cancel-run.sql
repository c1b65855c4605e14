-- Cancels a run and every unfinished step of it in one transaction. Running
-- handlers learn at their next heartbeat, which no longer matches a running
-- row. Returns the run's state before the call, or NULL for an unknown run.
--
-- The runs a code workflow started (wf.startChild) are cancelled with it,
-- theirs with them, in the same transaction. The run is marked cancelled
-- first, so its children, as they go, do not complete its waits for them;
-- and they go before any of its rows is written, so a child settling at
-- that moment, which holds its own lock and then writes rows of this run
-- (deliver-results.sql), never waits for this transaction while this one
-- waits for it. A child cancelled on its own tells a parent that waits for it.
CREATE OR REPLACE FUNCTION cyclone_cancel_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state  text;
  v_parent uuid;
BEGIN
  SELECT state, parent_id INTO v_state, v_parent FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS NULL OR v_state IN ('completed', 'cancelled') THEN
    RETURN v_state;
  END IF;

  UPDATE cyclone_runs
     SET state = 'cancelled', updated_at = now(), finished_at = now(),
         delete_after = now() + cyclone_kept_for(retention, 'cancelled', notify_finish)
   WHERE id = p_run_id;
  PERFORM cyclone_cancel_run(c.id) FROM cyclone_runs c
    WHERE c.parent_id = p_run_id AND c.state NOT IN ('completed', 'failed', 'cancelled')
    ORDER BY c.id;

  -- The attempt of a running step ends here: it is recorded before its row
  -- changes. The run's unfinished steps are locked first, so none becomes
  -- running (a claim takes no run lock) between the record and the update.
  PERFORM 1 FROM cyclone_steps WHERE run_id = p_run_id AND state NOT IN ('completed', 'discarded', 'cancelled') FOR UPDATE;
  PERFORM cyclone_record_attempt(run_id, id, attempt, started_at, lease_owner, 'cancelled', NULL, NULL, NULL)
     FROM cyclone_steps WHERE run_id = p_run_id AND state = 'running';

  UPDATE cyclone_steps
     SET state = 'cancelled', paused_state = NULL, lease_expiry = NULL,
         finished_at = now(), updated_at = now()
   WHERE run_id = p_run_id AND state NOT IN ('completed', 'discarded', 'cancelled');
  DELETE FROM cyclone_unique_keys WHERE run_id = p_run_id;
  IF v_parent IS NOT NULL THEN
    PERFORM cyclone_deliver_results(ARRAY[p_run_id]);
  END IF;
  PERFORM pg_notify('cyclone_run_finished', p_run_id::text);
  RETURN v_state;
END $$;
