-- A step of a paused run never becomes claimable: a retry after backoff, a
-- reclaim, a snooze or a hand-back that would make it available makes it
-- paused instead (its paused_state 'available'), to become available on
-- resume. Those four writes ask this, under the run's lock; the completion
-- and the claim never need it.
--
-- Not a trigger: a BEFORE UPDATE row trigger makes PostgreSQL lock each row
-- it updates before the update, whatever the trigger's WHEN says; a row the
-- transaction has not locked yet costs one more WAL record, which every
-- completion paid (55 bytes a job of W1's 1,850).
CREATE OR REPLACE FUNCTION cyclone_run_paused(p_run_id uuid) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM cyclone_runs WHERE id = p_run_id AND state = 'paused');
$$;
