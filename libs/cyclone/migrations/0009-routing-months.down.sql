-- Restores the routing and the settling of runs as version 8 defined them,
-- reading every month.
CREATE OR REPLACE FUNCTION cyclone_release_successors(p_run_ids uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_runs     uuid[] := ARRAY(SELECT id FROM cyclone_runs WHERE id = ANY (p_run_ids) AND workflow IS NOT NULL);
  v_woken    text[];
  v_consumed integer;
BEGIN
  IF cardinality(v_runs) = 0 THEN
    RETURN;
  END IF;
  LOOP
    WITH ready AS (
      SELECT s.run_id, s.id, r.state = 'paused' AS paused,
             CASE s.node_type WHEN 'step' THEN 'available' WHEN 'sleep' THEN 'waiting_timer'
                              ELSE 'waiting_signal' END AS next,
             CASE s.node_type
               WHEN 'sleep' THEN now() + (r.graph #>> ARRAY['nodes', s.node_id, 'sleepMs'])::bigint * interval '1 millisecond'
               WHEN 'signal' THEN now() + (r.graph #>> ARRAY['nodes', s.node_id, 'timeoutMs'])::bigint * interval '1 millisecond'
             END AS wake_at
        FROM cyclone_steps s
        JOIN cyclone_runs r ON r.id = s.run_id
       WHERE s.run_id = ANY (v_runs)
         AND s.state = 'pending'
         AND NOT EXISTS (
           SELECT 1 FROM cyclone_steps u
            WHERE u.run_id = s.run_id AND u.node_id = ANY (s.depends_on) AND u.state <> 'completed')
    ), moved AS (
      UPDATE cyclone_steps s
         SET state        = CASE WHEN ready.paused THEN 'paused' ELSE ready.next END,
             paused_state = CASE WHEN ready.paused THEN ready.next END,
             wake_at      = ready.wake_at,
             scheduled_at = now(),
             updated_at   = now()
        FROM ready
       WHERE s.run_id = ready.run_id AND s.id = ready.id
      RETURNING s.queue, s.state
    )
    SELECT array_agg(DISTINCT queue) INTO v_woken FROM moved WHERE state = 'available';
    PERFORM pg_notify('cyclone_wake', queue) FROM unnest(v_woken) AS queue;

    -- Signal waits that were signalled early: a lookup by run id, never by
    -- wake_at, so no partial index of waiting nodes can be taken for it.
    UPDATE cyclone_steps
       SET state = 'completed', output = signal, wake_at = NULL, finished_at = now(), updated_at = now()
     WHERE run_id = ANY (v_runs) AND state = 'waiting_signal' AND signalled_at IS NOT NULL;
    GET DIAGNOSTICS v_consumed = ROW_COUNT;
    EXIT WHEN v_consumed = 0;
  END LOOP;
END $$;

CREATE OR REPLACE FUNCTION cyclone_settle_runs(p_run_ids uuid[]) RETURNS void
LANGUAGE sql AS $$
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
     WHERE r.id = ANY (p_run_ids) AND r.state IN ('running', 'paused')
     GROUP BY r.id, r.state
  ), settled AS (
    UPDATE cyclone_runs r
       SET state = next.state, updated_at = now(), finished_at = now(), delete_after = now() + r.retention
      FROM next
     WHERE r.id = next.id AND next.state IS NOT NULL
    RETURNING r.id, r.notify_finish, r.unique_key
  ), freed AS (
    -- A finished run gives its unique key up.
    DELETE FROM cyclone_unique_keys k
     USING settled
     WHERE settled.unique_key IS NOT NULL AND k.unique_key = settled.unique_key AND k.run_id = settled.id
  )
  SELECT pg_notify('cyclone_run_finished', id::text) FROM settled WHERE notify_finish;
$$;

DELETE FROM cyclone_schema_migrations WHERE version = 9;
