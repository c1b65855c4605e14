-- Hands steps back (at shutdown, or claimed ahead and not started in time):
-- available at once, with neither an attempt nor a reclaim counted, since
-- nothing went wrong with them; their queues are woken so other clients take
-- them without waiting for a poll tick. Under the runs' locks, like every
-- transition; a paused run's steps are paused instead (keep-paused.sql).
-- Returns how many were handed back.
CREATE OR REPLACE FUNCTION cyclone_hand_back(p_run_ids uuid[], p_ids bigint[], p_owner text, p_generations bigint[])
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_queues text[];
BEGIN
  PERFORM cyclone_lock_runs(p_run_ids);
  WITH handed AS (
    UPDATE cyclone_steps s
       SET (state, paused_state) = (SELECT k.state, k.paused_state FROM cyclone_keep_paused(s.run_id, 'available') k),
           lease_owner = NULL, lease_expiry = NULL, updated_at = now()
      FROM unnest(p_run_ids, p_ids, p_generations) AS t(run_id, id, generation)
     WHERE s.run_id = t.run_id AND s.id = t.id AND s.state = 'running' AND s.lease_owner = p_owner AND s.lease_generation = t.generation
    RETURNING s.queue
  )
  SELECT array_agg(queue) INTO v_queues FROM handed;
  PERFORM pg_notify('cyclone_wake', queue) FROM (SELECT DISTINCT unnest(v_queues) AS queue) q;
  RETURN coalesce(cardinality(v_queues), 0);
END $$;
