-- A step of a paused run never becomes claimable: a retry after backoff, a
-- reclaim, a snooze or a hand-back that would make it available makes it
-- paused instead (its paused_state 'available'), to become available on
-- resume. Those four writes take a step out of running with this, under the
-- run's lock: SET (state, paused_state) = (SELECT … FROM cyclone_keep_paused(…)).
-- The completion and the claim never need it.
--
-- Not a trigger: a BEFORE UPDATE row trigger makes PostgreSQL lock each row
-- it updates before the update, whatever the trigger's WHEN says; a row the
-- transaction has not locked yet costs one more WAL record, which every
-- completion paid (55 bytes a job of W1's 1,850).
CREATE OR REPLACE FUNCTION cyclone_keep_paused(p_run_id uuid, p_state text, OUT state text, OUT paused_state text)
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN held THEN 'paused' ELSE p_state END, CASE WHEN held THEN p_state END
    FROM (SELECT p_state = 'available'
                 AND EXISTS (SELECT 1 FROM cyclone_runs r WHERE r.id = p_run_id AND r.state = 'paused') AS held) h;
$$;
