-- Inserts standalone jobs, one run and its one step each, in one statement:
-- the one definition of what an enqueue writes. The client's enqueue,
-- enqueueMany and enqueueTx (src/sql/enqueue.sql.ts) and cyclone_enqueue
-- (enqueue.sql) call it. Arrays in the same order, one element a job.
--
-- A job whose unique key an unfinished run already holds is not inserted,
-- and raises nothing, so a caller's transaction goes on: the caller reads the
-- holder (cyclone_unique_keys) and decides. With p_notify the queues with a
-- job due now are woken from here, which NOTIFY delivers on commit: for
-- inserts inside a caller's transaction. Without it the caller wakes them
-- once its own commit has returned, coalesced with others (WakePublisher).
-- Each step gets its kind's backoff (an array literal, NULL for the default)
-- and its limits' keys. Returns each inserted job's id, queue, and whether
-- it is due now.
--
-- cyclone_insert_jobs_leased is the insert itself; it can also write some of
-- the jobs as already started (insert-and-start.sql).
CREATE OR REPLACE FUNCTION cyclone_insert_jobs(p_ids uuid[], p_kinds text[], p_inputs jsonb[], p_queues text[],
                                               p_unique_keys text[], p_retention_ms bigint[], p_priorities smallint[],
                                               p_max_attempts integer[], p_max_reclaims integer[], p_timeout_ms bigint[],
                                               p_process_at timestamptz[], p_process_in_ms bigint[],
                                               p_trace_contexts jsonb[], p_backoff_ms text[], p_flow_keys text[],
                                               p_rate_keys text[], p_notify boolean)
RETURNS TABLE (id uuid, queue text, due boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT i.id, i.queue, i.due
    FROM cyclone_insert_jobs_leased(p_ids, p_kinds, p_inputs, p_queues, p_unique_keys, p_retention_ms, p_priorities,
                                    p_max_attempts, p_max_reclaims, p_timeout_ms, p_process_at, p_process_in_ms,
                                    p_trace_contexts, p_backoff_ms, p_flow_keys, p_rate_keys, NULL, NULL, NULL) i;
  -- The steps just inserted that are due now (in this transaction, now() is the insert's).
  IF p_notify THEN
    PERFORM pg_notify('cyclone_wake', q.queue)
       FROM (SELECT DISTINCT s.queue FROM cyclone_steps s WHERE s.run_id = ANY (p_ids) AND s.scheduled_at <= now()) q;
  END IF;
END $$;

-- The insert, with the jobs at positions p_started of the arrays (from 1;
-- NULL for none) written as started: running, leased to p_owner for
-- p_lease_ttl_ms, as a claim leaves a step (cyclone_start_steps). Such a job
-- is written once and never available, so it leaves no entry in the claim
-- index and no outbox row. Returns each job's step id too, whether it
-- started, and for a started one how long it waited since it was due.
CREATE OR REPLACE FUNCTION cyclone_insert_jobs_leased(p_ids uuid[], p_kinds text[], p_inputs jsonb[], p_queues text[],
                                                      p_unique_keys text[], p_retention_ms bigint[],
                                                      p_priorities smallint[], p_max_attempts integer[],
                                                      p_max_reclaims integer[], p_timeout_ms bigint[],
                                                      p_process_at timestamptz[], p_process_in_ms bigint[],
                                                      p_trace_contexts jsonb[], p_backoff_ms text[], p_flow_keys text[],
                                                      p_rate_keys text[], p_started integer[], p_owner text,
                                                      p_lease_ttl_ms bigint)
RETURNS TABLE (id uuid, queue text, due boolean, step_id bigint, started boolean, wait_ms float8)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH jobs AS (
    SELECT t.*, coalesce(t.position = ANY (p_started), false) AS started
      FROM unnest(p_ids, p_kinds, p_inputs, p_queues, p_unique_keys, p_retention_ms, p_priorities,
                  p_max_attempts, p_max_reclaims, p_timeout_ms, p_process_at, p_process_in_ms,
                  p_trace_contexts, p_backoff_ms, p_flow_keys, p_rate_keys) WITH ORDINALITY
        AS t(id, kind, input, queue, unique_key, retention_ms, priority, max_attempts, max_reclaims, timeout_ms,
             process_at, process_in_ms, trace_context, backoff_ms, flow_key, rate_key, position)
  ), keys AS (
    INSERT INTO cyclone_unique_keys (unique_key, run_id)
    SELECT j.unique_key, j.id FROM jobs j WHERE p_unique_keys IS NOT NULL AND j.unique_key IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING run_id
  ), runs AS (
    INSERT INTO cyclone_runs (id, kind, input, queue, unique_key, retention, trace_context)
    SELECT j.id, j.kind, j.input, j.queue, j.unique_key, j.retention_ms * interval '1 millisecond', j.trace_context
      FROM jobs j
     WHERE j.unique_key IS NULL OR j.id IN (SELECT k.run_id FROM keys k)
    RETURNING id
  ), steps AS (
    INSERT INTO cyclone_steps (run_id, node_id, kind, queue, priority, state, max_attempts, max_reclaims,
                               timeout, scheduled_at, backoff_ms, flow_key, rate_key,
                               lease_owner, lease_generation, lease_expiry, started_at, heartbeat_at)
    SELECT j.id, j.kind, j.kind, j.queue, j.priority, CASE WHEN j.started THEN 'running' ELSE 'available' END,
           j.max_attempts, j.max_reclaims, j.timeout_ms * interval '1 millisecond',
           COALESCE(j.process_at, now() + j.process_in_ms * interval '1 millisecond'), j.backoff_ms::bigint[],
           j.flow_key, j.rate_key,
           CASE WHEN j.started THEN p_owner END,
           CASE WHEN j.started THEN 1 ELSE 0 END,
           CASE WHEN j.started THEN now() + p_lease_ttl_ms * interval '1 millisecond' END,
           CASE WHEN j.started THEN now() END,
           CASE WHEN j.started THEN now() END
      FROM jobs j JOIN runs r ON r.id = j.id
    RETURNING run_id, queue, scheduled_at <= now() AS due, id AS step_id, state = 'running' AS started,
              (extract(epoch FROM now() - scheduled_at) * 1000)::float8 AS wait_ms
  )
  SELECT s.run_id, s.queue, s.due, s.step_id, s.started, CASE WHEN s.started THEN s.wait_ms END FROM steps s;
END $$;
