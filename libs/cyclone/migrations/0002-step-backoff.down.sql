-- Removes what 0002-step-backoff.sql added: the stored backoff, and the
-- functions it changed, back to their version 1 bodies.
ALTER TABLE cyclone_steps DROP COLUMN IF EXISTS backoff_ms;

CREATE OR REPLACE FUNCTION cyclone_fail_step(p_run_id uuid, p_step_id bigint, p_owner text, p_generation bigint,
                                             p_error text, p_error_kind text, p_retry_delay_ms bigint)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_run_id uuid;
  v_state  text;
BEGIN
  v_run_id := cyclone_lock_run(p_run_id);
  IF v_run_id IS NULL THEN
    RETURN NULL;
  END IF;

  UPDATE cyclone_steps s
     SET state        = f.next_state,
         attempt      = CASE WHEN f.next_state = 'discarded' THEN s.attempt ELSE s.attempt + 1 END,
         scheduled_at = CASE WHEN f.next_state = 'discarded' THEN s.scheduled_at
                             ELSE now() + p_retry_delay_ms * interval '1 millisecond' END,
         finished_at  = CASE WHEN f.next_state = 'discarded' THEN now() END,
         error        = p_error,
         error_kind   = f.error_kind,
         lease_owner  = NULL,
         lease_expiry = NULL,
         updated_at   = now()
    FROM (SELECT CASE WHEN timeout IS NOT NULL AND started_at + timeout <= now() THEN 'timeout'
                      ELSE p_error_kind END AS error_kind,
                 CASE WHEN p_error_kind = 'permanent' OR attempt >= max_attempts THEN 'discarded'
                      ELSE 'available' END AS next_state
            FROM cyclone_steps WHERE run_id = p_run_id AND id = p_step_id) f
   WHERE s.run_id = p_run_id AND s.id = p_step_id AND s.state = 'running'
     AND s.lease_owner = p_owner AND s.lease_generation = p_generation
  RETURNING s.state INTO v_state;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;

  IF v_state = 'discarded' THEN
    PERFORM cyclone_settle_run(v_run_id);
  END IF;
  RETURN v_state;
END $$;

-- The workflow start of version 1 (the one 0002 included may already take
-- the trace context of version 3, a signature of its own).
DROP FUNCTION IF EXISTS cyclone_start_workflow(uuid, text, jsonb, jsonb, text, text, bigint, jsonb, jsonb);
CREATE OR REPLACE FUNCTION cyclone_start_workflow(p_run_id uuid, p_workflow text, p_graph jsonb, p_input jsonb,
                                                  p_queue text, p_unique_key text, p_retention_ms bigint,
                                                  p_nodes jsonb)
RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
  IF p_unique_key IS NOT NULL THEN
    INSERT INTO cyclone_unique_keys (unique_key, run_id) VALUES (p_unique_key, p_run_id) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
      RETURN NULL;
    END IF;
  END IF;
  INSERT INTO cyclone_runs (id, workflow, graph, input, queue, unique_key, retention)
  VALUES (p_run_id, p_workflow, p_graph, p_input, p_queue, p_unique_key, p_retention_ms * interval '1 millisecond');

  INSERT INTO cyclone_steps (run_id, node_id, kind, node_type, queue, priority, state, depends_on,
                             max_attempts, max_reclaims, timeout)
  SELECT p_run_id, n.node_id, n.kind, n.node_type, n.queue, n.priority, 'pending', n.depends_on,
         n.max_attempts, n.max_reclaims, n.timeout_ms * interval '1 millisecond'
    FROM jsonb_to_recordset(p_nodes) AS n(node_id text, kind text, node_type text, queue text, priority smallint,
                                         depends_on text[], max_attempts integer, max_reclaims integer,
                                         timeout_ms bigint);

  PERFORM cyclone_release_successors(ARRAY[p_run_id]);
  RETURN p_run_id;
END $$;

DELETE FROM cyclone_schema_migrations WHERE version = 2;
