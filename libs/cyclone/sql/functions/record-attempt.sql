-- Keeps the record of an attempt that ended other than by completing: failed
-- (then retried or discarded), timed out, cancelled under its handler,
-- reclaimed from a worker that stopped heartbeating, discarded past
-- maxReclaims, or snoozed. Called by the transition that ends it, under the
-- run's lock, with what the step held while the attempt ran (its number, its
-- start, the worker that held its lease). The attempt that completes a step,
-- and the one running now, are read from the step's own row (its attempt,
-- started_at, finished_at and lease_owner), so a completion writes nothing
-- here: the hot path stays one update a step.
--
-- seq numbers a step's ended attempts in order: a reclaim or a snooze does
-- not consume an attempt, so the next one runs with the same attempt number.
-- Only the last 20 of a step are kept, so a step that snoozes or is
-- reclaimed forever keeps a bounded history.
CREATE OR REPLACE FUNCTION cyclone_record_attempt(p_run_id uuid, p_step_id bigint, p_attempt integer,
                                                  p_started_at timestamptz, p_worker text, p_outcome text,
                                                  p_error text, p_error_kind text, p_stack text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_seq integer;
BEGIN
  SELECT coalesce(max(seq), 0) + 1 INTO v_seq FROM cyclone_attempts WHERE run_id = p_run_id AND step_id = p_step_id;
  INSERT INTO cyclone_attempts (run_id, step_id, seq, attempt, started_at, finished_at, outcome, error, error_kind, stack, worker)
  VALUES (p_run_id, p_step_id, v_seq, p_attempt, p_started_at, now(), p_outcome, p_error, p_error_kind, p_stack, p_worker);
  DELETE FROM cyclone_attempts WHERE run_id = p_run_id AND step_id = p_step_id AND seq <= v_seq - 20;
END $$;
