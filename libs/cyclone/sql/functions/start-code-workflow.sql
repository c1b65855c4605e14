-- Starts a run of a workflow written as code (SPEC §18): the run, recording
-- the version of the workflow that started it, and one node for the
-- workflow's method, available at once and claimed like any step (its node
-- id and kind are the workflow's name). The nodes of its durable calls are
-- added as the method makes them (record-nodes.sql). A child run names its
-- parent (p_parent_id), which cancels it with itself and learns of its
-- finish (deliver-results.sql). Returns the run id, or NULL when the unique
-- key is held.
CREATE OR REPLACE FUNCTION cyclone_start_code_workflow(p_run_id uuid, p_workflow text, p_version integer, p_input jsonb,
                                                       p_queue text, p_priority smallint, p_unique_key text,
                                                       p_retention_ms bigint, p_max_attempts integer,
                                                       p_max_reclaims integer, p_timeout_ms bigint, p_backoff_ms bigint[],
                                                       p_trace_context jsonb, p_parent_id uuid)
RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
  IF p_unique_key IS NOT NULL THEN
    INSERT INTO cyclone_unique_keys (unique_key, run_id) VALUES (p_unique_key, p_run_id) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
      RETURN NULL;
    END IF;
  END IF;
  INSERT INTO cyclone_runs (id, workflow, version, input, queue, unique_key, retention, trace_context, parent_id)
  VALUES (p_run_id, p_workflow, p_version, p_input, p_queue, p_unique_key, p_retention_ms * interval '1 millisecond',
          p_trace_context, p_parent_id);
  INSERT INTO cyclone_steps (run_id, node_id, kind, node_type, queue, priority, state, max_attempts, max_reclaims,
                             timeout, backoff_ms)
  VALUES (p_run_id, p_workflow, p_workflow, 'workflow', p_queue, p_priority, 'available', p_max_attempts, p_max_reclaims,
          p_timeout_ms * interval '1 millisecond', p_backoff_ms);
  PERFORM pg_notify('cyclone_wake', p_queue);
  RETURN p_run_id;
END $$;
