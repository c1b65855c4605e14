-- Outbox rows for available steps that have none: the recovery of dispatches
-- that never reached a worker (seed 004, step 3). p_older_than NULL takes
-- every such step (Redis lost its data, or dispatch was off for a while, or a
-- queue was resumed: p_queue); otherwise only steps available and untouched
-- for longer than that, each at most once per interval (updated_at is
-- touched). A step whose message still waits in a stream may be dispatched
-- twice; the second start finds it running and drops the message. Steps of a
-- paused run are paused, not available, and are dispatched on resume.
-- Returns how many were re-dispatched.
CREATE OR REPLACE FUNCTION cyclone_redispatch(p_older_than interval, p_queue text DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_n integer;
BEGIN
  WITH lost AS (
    UPDATE cyclone_steps s
       SET updated_at = now()
     WHERE s.state = 'available'
       AND (p_queue IS NULL OR s.queue = p_queue)
       AND (p_older_than IS NULL OR s.updated_at < now() - p_older_than)
       AND s.run_id >= (SELECT f.low FROM cyclone_claim_floor f)
       AND NOT EXISTS (SELECT 1 FROM cyclone_outbox o WHERE o.step_id = s.id)
    RETURNING s.id, s.run_id, s.queue, s.kind, s.node_type, s.priority, s.scheduled_at
  )
  INSERT INTO cyclone_outbox (step_id, run_id, queue, kind, node_type, priority, due_at)
  SELECT id, run_id, queue, kind, node_type, priority, scheduled_at FROM lost;
  GET DIAGNOSTICS v_n = ROW_COUNT;
  IF v_n > 0 THEN
    PERFORM pg_notify('cyclone_outbox', '');
  END IF;
  RETURN v_n;
END $$;
