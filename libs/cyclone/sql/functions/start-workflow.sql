-- Starts a workflow run: the run with its graph, one pending row per node
-- (with its step's backoff per attempt, when the step has its own; a node
-- of a limited kind with the flow and rate keys its kind's key functions
-- gave for the run's input), then routing makes the roots move. Returns
-- NULL when the unique key is held by an unfinished run (nothing is
-- written). p_trace_context is the trace context of the starter's span, so
-- each node's span continues its trace.
CREATE OR REPLACE FUNCTION cyclone_start_workflow(p_run_id uuid, p_workflow text, p_graph jsonb, p_input jsonb,
                                                  p_queue text, p_unique_key text, p_retention_ms bigint,
                                                  p_nodes jsonb, p_trace_context jsonb)
RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
  IF p_unique_key IS NOT NULL THEN
    INSERT INTO cyclone_unique_keys (unique_key, run_id) VALUES (p_unique_key, p_run_id) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
      RETURN NULL;
    END IF;
  END IF;
  INSERT INTO cyclone_runs (id, workflow, graph, input, queue, unique_key, retention, trace_context)
  VALUES (p_run_id, p_workflow, p_graph, p_input, p_queue, p_unique_key, p_retention_ms * interval '1 millisecond',
          p_trace_context);

  INSERT INTO cyclone_steps (run_id, node_id, kind, node_type, queue, priority, state, depends_on,
                             max_attempts, max_reclaims, timeout, backoff_ms, flow_key, rate_key)
  SELECT p_run_id, n.node_id, n.kind, n.node_type, n.queue, n.priority, 'pending', n.depends_on,
         n.max_attempts, n.max_reclaims, n.timeout_ms * interval '1 millisecond', n.backoff_ms, n.flow_key, n.rate_key
    FROM jsonb_to_recordset(p_nodes) AS n(node_id text, kind text, node_type text, queue text, priority smallint,
                                         depends_on text[], max_attempts integer, max_reclaims integer,
                                         timeout_ms bigint, backoff_ms bigint[], flow_key text, rate_key text);

  PERFORM cyclone_release_successors(ARRAY[p_run_id]);
  RETURN p_run_id;
END $$;
