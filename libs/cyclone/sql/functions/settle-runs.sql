-- Settling: a run's state recomputed from its steps. Callers hold the runs'
-- locks, so two steps finishing at once cannot both miss the other. Paused
-- and cancelled are set by the client only; a paused run may still complete.
-- A run fails once a step is discarded and nothing else of it can move on
-- (the nodes below stay pending, so a retry carries the run on). A finish is
-- announced only to clients waiting for it (notify_finish): a NOTIFY holds
-- the server-wide notification lock through its commit. The months before
-- the oldest run are left out (live-months.sql); plpgsql, because the
-- baseline migration creates this function before cyclone_lowest_id exists,
-- and a SQL function's body is checked when it is created.

CREATE OR REPLACE FUNCTION cyclone_settle_runs(p_run_ids uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_lo     uuid := cyclone_lowest_id(p_run_ids);
  v_notify uuid[];
BEGIN
  WITH next AS (
    SELECT r.id,
           CASE
             WHEN bool_and(s.state = 'completed') THEN 'completed'
             WHEN r.state = 'running' AND bool_or(s.state = 'discarded')
                  AND NOT bool_or(s.state IN ('available', 'running', 'waiting_signal', 'waiting_timer', 'paused'))
               THEN 'failed'
           END AS state
      FROM cyclone_runs r
      JOIN cyclone_steps s ON s.run_id = r.id
     WHERE r.id = ANY (p_run_ids) AND r.id >= v_lo AND s.run_id >= v_lo AND r.state IN ('running', 'paused')
     GROUP BY r.id, r.state
  ), settled AS (
    UPDATE cyclone_runs r
       SET state = next.state, updated_at = now(), finished_at = now(), delete_after = now() + r.retention
      FROM next
     WHERE r.id = next.id AND r.id >= v_lo AND next.state IS NOT NULL
    RETURNING r.id, r.notify_finish, r.unique_key
  ), freed AS (
    -- A finished run gives its unique key up.
    DELETE FROM cyclone_unique_keys k
     USING settled
     WHERE settled.unique_key IS NOT NULL AND k.unique_key = settled.unique_key AND k.run_id = settled.id
  )
  SELECT array_agg(settled.id) FILTER (WHERE settled.notify_finish) INTO v_notify FROM settled;
  PERFORM pg_notify('cyclone_run_finished', finished_id::text) FROM unnest(v_notify) AS finished_id;
END $$;

-- One run, for the transitions that settle a single run; returns its state.
CREATE OR REPLACE FUNCTION cyclone_settle_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM cyclone_settle_runs(ARRAY[p_run_id]);
  RETURN (SELECT state FROM cyclone_runs WHERE id = p_run_id);
END $$;
