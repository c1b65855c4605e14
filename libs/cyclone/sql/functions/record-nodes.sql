-- What a pass of a code workflow records, in one statement per batch of its
-- durable calls (src/workflow/replay/node-recorder.ts): the results of inline
-- calls (wf.run) that completed together, the answers of wf.patched, child
-- runs started (wf.startChild, each run created here too), steps to run
-- (wf.step, a fan-out of a thousand in one insert), and waits (wf.sleep,
-- wf.waitForSignal, wf.result). A compare-and-set on the pass's lease, as
-- every write of an attempt: a holder that lost it writes nothing.
--
-- p_ops holds the new nodes in call order, so their ids keep that order. A
-- node the run already has can only be one waiting to go again: an inline
-- call whose retry is due, or a wait reopened by a retry of the run (state
-- pending); it is updated in place. A wait may finish at once: a signal sent
-- before the method reached its wait is kept on the workflow's node and
-- consumed here, and the result of a child that already finished is taken.
-- Those get their place in the order the method learns of results from
-- p_next_observed on (see load-history.sql); the pass numbered the rest.
--
-- With p_suspend the pass has nothing left to do but wait for p_awaited. If
-- one of them has finished meanwhile, or a wait above finished at once, the
-- pass goes on, and those nodes are returned to it; otherwise the workflow's
-- node goes back to pending, waiting on them (depends_on), its lease given
-- up and no attempt counted (the pass is kept among its attempts as
-- suspended): the worker slot is free, and the first of them
-- to finish makes the node available again, p_wake_delay_ms later
-- (wake-workflows.sql).
--
-- Locks: the run, then the child runs a wf.result waits on (FOR SHARE: a
-- child that is settling finishes first, and this statement sees its
-- outcome; one that settles later finds the wait recorded), and only then
-- rows of this run. A child that settles takes its own run's lock and then
-- rows of its parent, never its parent's run lock (deliver-results.sql), and
-- a child's id is always above its parent's, so a completion batch holding
-- both locks them parent first, as this does.
--
-- Returns the nodes that finished for the pass, then a status row (node_id
-- NULL): 'running', 'suspended', or 'lost'. Its plans are kept, joins by key
-- (see complete-steps.sql): planned afresh on every call, its statements
-- over every month's partitions cost more than the writes themselves.
CREATE OR REPLACE FUNCTION cyclone_record_nodes(p_run_id uuid, p_node_id text, p_owner text, p_generation bigint,
                                                p_ops jsonb, p_next_observed integer, p_suspend boolean,
                                                p_awaited text[], p_wake_delay_ms integer)
RETURNS TABLE (node_id text, state text, output jsonb, error text, error_kind text, observed integer,
               attempt integer, max_attempts integer)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_run      cyclone_runs%ROWTYPE;
  v_me       cyclone_steps%ROWTYPE;
  v_paused   boolean;
  v_queues   text[];
  v_finished text[] := '{}';
  v_stash    text[];
  v_next     integer := p_next_observed;
  v_count    integer;
BEGIN
  SELECT * INTO v_run FROM cyclone_runs r WHERE r.id = p_run_id FOR UPDATE;
  PERFORM 1 FROM cyclone_runs c
   WHERE c.id IN (SELECT (o ->> 'input')::uuid FROM jsonb_array_elements(p_ops) AS o WHERE o ->> 'op' = 'result')
   ORDER BY c.id FOR SHARE;
  SELECT * INTO v_me FROM cyclone_steps s
   WHERE s.run_id = p_run_id AND s.node_id = p_node_id AND s.state = 'running'
     AND s.lease_owner = p_owner AND s.lease_generation = p_generation
     AND (s.timeout IS NULL OR s.started_at + s.timeout > now())
     FOR UPDATE;
  IF NOT FOUND THEN
    node_id := NULL;
    state := 'lost';
    RETURN NEXT;
    RETURN;
  END IF;
  v_paused := v_run.state = 'paused';

  IF jsonb_array_length(p_ops) > 0 THEN
    -- Child runs first, so each child node below names a run that exists. A
    -- child of a DAG workflow is started as any DAG run is.
    INSERT INTO cyclone_runs (id, kind, workflow, version, input, queue, retention, trace_context, parent_id)
    SELECT o.run_id, CASE WHEN o.child = 'job' THEN o.kind END, CASE WHEN o.child = 'code' THEN o.kind END,
           o.version, o.input, o.queue, o.retention_ms * interval '1 millisecond', v_run.trace_context, p_run_id
      FROM jsonb_to_recordset(p_ops) AS o(op text, child text, run_id uuid, kind text, version integer, input jsonb,
                                          queue text, retention_ms bigint)
     WHERE o.op = 'child' AND o.child IN ('job', 'code');
    INSERT INTO cyclone_steps (run_id, node_id, kind, node_type, queue, priority, state, max_attempts, max_reclaims,
                               timeout, backoff_ms, flow_key, rate_key)
    SELECT o.run_id, o.kind, o.kind, CASE WHEN o.child = 'job' THEN 'step' ELSE 'workflow' END, o.queue, o.priority,
           'available', o.max_attempts, o.max_reclaims, o.timeout_ms * interval '1 millisecond', o.backoff_ms,
           o.flow_key, o.rate_key
      FROM jsonb_to_recordset(p_ops) AS o(op text, child text, run_id uuid, kind text, queue text, priority smallint,
                                          max_attempts integer, max_reclaims integer, timeout_ms bigint,
                                          backoff_ms bigint[], flow_key text, rate_key text)
     WHERE o.op = 'child' AND o.child IN ('job', 'code');
    PERFORM cyclone_start_workflow(o.run_id, o.kind, o.graph, o.input, o.queue, NULL, o.retention_ms, o.nodes,
                                   v_run.trace_context)
       FROM jsonb_to_recordset(p_ops) AS o(op text, child text, run_id uuid, kind text, graph jsonb, input jsonb,
                                           queue text, retention_ms bigint, nodes jsonb)
      WHERE o.op = 'child' AND o.child = 'dag';
    UPDATE cyclone_runs r SET parent_id = p_run_id
      FROM jsonb_to_recordset(p_ops) AS o(op text, child text, run_id uuid)
     WHERE o.op = 'child' AND o.child = 'dag' AND r.id = o.run_id;

    -- This run's nodes, in call order. What a node starts as: a step is
    -- available, a sleep and an inline retry wait for their timer, a signal
    -- or a child's result waits; in a paused run those arrive paused.
    WITH ops AS (
      SELECT o.*,
             CASE o.op WHEN 'run' THEN o.state WHEN 'step' THEN 'available' WHEN 'sleep' THEN 'waiting_timer'
                       WHEN 'signal' THEN 'waiting_signal' WHEN 'result' THEN 'waiting_signal' ELSE 'completed' END AS next
        FROM ROWS FROM (jsonb_to_recordset(p_ops) AS (op text, name text, kind text, input jsonb, output jsonb,
                                                      state text, error text, error_kind text, attempt integer,
                                                      max_attempts integer, max_reclaims integer, timeout_ms bigint,
                                                      backoff_ms bigint[], queue text, priority smallint,
                                                      flow_key text, rate_key text, wait_ms bigint, ran_ms bigint,
                                                      observed integer, run_id uuid))
             WITH ORDINALITY AS o(op, name, kind, input, output, state, error, error_kind, attempt, max_attempts,
                                  max_reclaims, timeout_ms, backoff_ms, queue, priority, flow_key, rate_key, wait_ms,
                                  ran_ms, observed, run_id, ord)
    ), inserted AS (
      INSERT INTO cyclone_steps AS s (run_id, node_id, kind, node_type, queue, priority, state, paused_state, input,
                                      output, error, error_kind, attempt, max_attempts, max_reclaims, timeout,
                                      backoff_ms, flow_key, rate_key, wake_at, started_at, finished_at, observed)
      SELECT p_run_id, o.name, CASE WHEN o.op IN ('step', 'child') THEN o.kind END, o.op,
             CASE WHEN o.op = 'step' THEN o.queue ELSE v_run.queue END,
             CASE WHEN o.op = 'step' THEN o.priority ELSE 0 END,
             CASE WHEN v_paused AND o.next IN ('available', 'waiting_timer', 'waiting_signal') THEN 'paused' ELSE o.next END,
             CASE WHEN v_paused AND o.next IN ('available', 'waiting_timer', 'waiting_signal') THEN o.next END,
             CASE WHEN o.op = 'child' THEN o.input WHEN o.op IN ('step', 'result') THEN o.input END,
             CASE WHEN o.op = 'child' THEN to_jsonb(o.run_id::text) ELSE o.output END,
             o.error, o.error_kind,
             CASE WHEN o.op = 'run' AND o.next = 'waiting_timer' THEN o.attempt + 1 ELSE coalesce(o.attempt, 1) END,
             coalesce(o.max_attempts, 1),
             CASE WHEN o.op = 'step' THEN o.max_reclaims END,
             CASE WHEN o.op = 'step' THEN o.timeout_ms * interval '1 millisecond' END,
             CASE WHEN o.op = 'step' THEN o.backoff_ms END,
             CASE WHEN o.op = 'step' THEN o.flow_key END,
             CASE WHEN o.op = 'step' THEN o.rate_key END,
             CASE WHEN o.next IN ('waiting_timer', 'waiting_signal') THEN now() + o.wait_ms * interval '1 millisecond' END,
             CASE WHEN o.op = 'run' THEN now() - o.ran_ms * interval '1 millisecond' END,
             CASE WHEN o.next IN ('completed', 'discarded') THEN now() END,
             o.observed
        FROM ops o
       ORDER BY o.ord
      ON CONFLICT (run_id, node_id) DO UPDATE
         SET state = EXCLUDED.state, paused_state = EXCLUDED.paused_state, output = EXCLUDED.output,
             error = EXCLUDED.error, error_kind = EXCLUDED.error_kind, attempt = EXCLUDED.attempt,
             max_attempts = greatest(s.max_attempts, EXCLUDED.max_attempts), wake_at = EXCLUDED.wake_at,
             started_at = coalesce(EXCLUDED.started_at, s.started_at), finished_at = EXCLUDED.finished_at,
             observed = EXCLUDED.observed, updated_at = now()
       WHERE s.state = 'pending'
      RETURNING s.queue, s.state
    )
    SELECT array_agg(DISTINCT i.queue) FILTER (WHERE i.state = 'available') INTO v_queues FROM inserted i;
    -- An inline call's attempt that failed is kept as a step's is, with its
    -- stack (record-attempt.sql); its node holds the attempt that follows, or
    -- the failure that discarded it.
    PERFORM cyclone_record_attempt(p_run_id, s.id, o.attempt, now() - o.ran_ms * interval '1 millisecond', p_owner,
                                   CASE WHEN o.error_kind = 'timeout' THEN 'timed_out'
                                        WHEN o.state = 'discarded' THEN 'discarded' ELSE 'retried' END,
                                   o.error, o.error_kind, o.stack)
       FROM jsonb_to_recordset(p_ops) AS o(op text, name text, state text, attempt integer, ran_ms bigint, error text,
                                           error_kind text, stack text)
       JOIN cyclone_steps s ON s.run_id = p_run_id AND s.node_id = o.name
      WHERE o.op = 'run' AND o.error IS NOT NULL;
    SELECT v_queues || coalesce(array_agg(DISTINCT o ->> 'queue'), '{}') INTO v_queues
      FROM jsonb_array_elements(p_ops) AS o WHERE o ->> 'op' = 'child';
    PERFORM pg_notify('cyclone_wake', q) FROM (SELECT DISTINCT unnest(v_queues) AS q) w WHERE q IS NOT NULL;

    -- Waits that finish at once: signals kept for them (on the workflow's
    -- node, or on a reopened wait's own row), and results of children that
    -- have finished.
    WITH stashed AS (
      UPDATE cyclone_steps s
         SET state = 'completed', paused_state = NULL, output = v_me.signal -> s.node_id, wake_at = NULL,
             signalled_at = now(), finished_at = now(), updated_at = now()
       WHERE s.run_id = p_run_id AND s.node_type = 'signal' AND s.state IN ('waiting_signal', 'paused')
         AND s.node_id IN (SELECT o ->> 'name' FROM jsonb_array_elements(p_ops) AS o WHERE o ->> 'op' = 'signal')
         AND v_me.signal ? s.node_id
      RETURNING s.node_id
    )
    SELECT array_agg(node_id) INTO v_stash FROM stashed;
    IF v_stash IS NOT NULL THEN
      UPDATE cyclone_steps SET signal = signal - v_stash, updated_at = now()
       WHERE run_id = p_run_id AND id = v_me.id;
      v_finished := v_finished || v_stash;
    END IF;
    WITH taken AS (
      UPDATE cyclone_steps s
         SET state = 'completed', paused_state = NULL, output = s.signal, wake_at = NULL, finished_at = now(),
             updated_at = now()
       WHERE s.run_id = p_run_id AND s.node_type = 'signal' AND s.state IN ('waiting_signal', 'paused')
         AND s.signalled_at IS NOT NULL
         AND s.node_id IN (SELECT o ->> 'name' FROM jsonb_array_elements(p_ops) AS o WHERE o ->> 'op' = 'signal')
      RETURNING s.node_id
    ), results AS (
      UPDATE cyclone_steps s
         SET state = CASE WHEN c.state = 'completed' THEN 'completed' ELSE 'discarded' END, paused_state = NULL,
             output = CASE WHEN c.state = 'completed' THEN cyclone_run_output(c.id) END,
             error = CASE WHEN c.state <> 'completed' THEN cyclone_run_failure(c.id) END,
             error_kind = CASE WHEN c.state <> 'completed' THEN 'error' END,
             finished_at = now(), updated_at = now()
        FROM cyclone_runs c
       WHERE c.id IN (SELECT (o ->> 'input')::uuid FROM jsonb_array_elements(p_ops) AS o WHERE o ->> 'op' = 'result')
         AND c.state IN ('completed', 'failed', 'cancelled')
         AND s.run_id = p_run_id AND s.node_id = c.id::text AND s.node_type = 'result'
         AND s.state IN ('waiting_signal', 'paused')
      RETURNING s.node_id
    )
    SELECT v_finished || coalesce((SELECT array_agg(node_id) FROM taken), '{}')
                      || coalesce((SELECT array_agg(node_id) FROM results), '{}')
      INTO v_finished;
  END IF;

  -- Nothing finished at once: the awaited nodes that finished meanwhile, and
  -- inline calls whose retry came due, are the pass's to go on with.
  IF p_suspend AND cardinality(v_finished) = 0 THEN
    SELECT array_agg(s.node_id) INTO v_finished FROM cyclone_steps s
     WHERE s.run_id = p_run_id AND s.node_id = ANY (p_awaited)
       AND (s.state IN ('completed', 'discarded', 'cancelled') OR (s.node_type = 'run' AND s.state = 'pending'));
    IF v_finished IS NULL THEN
      -- The pass's attempt ends here, kept as suspended (record-attempt.sql);
      -- the next pass runs under the same attempt number.
      PERFORM cyclone_record_attempt(p_run_id, v_me.id, v_me.attempt, v_me.started_at, p_owner, 'suspended',
                                     NULL, NULL, NULL);
      UPDATE cyclone_steps
         SET state = CASE WHEN v_paused THEN 'paused' ELSE 'pending' END,
             paused_state = CASE WHEN v_paused THEN 'pending' END,
             depends_on = p_awaited, wake_delay_ms = p_wake_delay_ms, lease_owner = NULL, lease_expiry = NULL,
             updated_at = now()
       WHERE run_id = p_run_id AND id = v_me.id;
      node_id := NULL;
      state := 'suspended';
      RETURN NEXT;
      RETURN;
    END IF;
  END IF;

  IF cardinality(v_finished) > 0 THEN
    UPDATE cyclone_steps s
       SET observed = v_next + n.rank - 1
      FROM (SELECT u.id, row_number() OVER (ORDER BY u.finished_at, u.id) AS rank
              FROM cyclone_steps u
             WHERE u.run_id = p_run_id AND u.node_id = ANY (v_finished) AND u.observed IS NULL
               AND u.state IN ('completed', 'discarded', 'cancelled')) n
     WHERE s.run_id = p_run_id AND s.id = n.id;
    RETURN QUERY
    SELECT s.node_id, s.state, s.output, s.error, s.error_kind, s.observed, s.attempt, s.max_attempts
      FROM cyclone_steps s
     WHERE s.run_id = p_run_id AND s.node_id = ANY (v_finished)
     ORDER BY s.observed NULLS LAST, s.id;
  END IF;
  node_id := NULL;
  state := 'running';
  RETURN NEXT;
END $$;
