-- What a run gives the parent that waits on it (wf.result): a standalone
-- job's output, a code workflow's return value (its node's output), or a DAG
-- workflow's sink outputs by node id, as client.result() gives them.
CREATE OR REPLACE FUNCTION cyclone_run_output(p_run_id uuid) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT CASE
           WHEN r.kind IS NOT NULL THEN (SELECT s.output FROM cyclone_steps s WHERE s.run_id = r.id LIMIT 1)
           WHEN r.version IS NOT NULL THEN
             (SELECT s.output FROM cyclone_steps s WHERE s.run_id = r.id AND s.node_id = r.workflow)
           ELSE (SELECT jsonb_object_agg(s.node_id, s.output) FROM cyclone_steps s
                  WHERE s.run_id = r.id
                    AND NOT EXISTS (SELECT 1 FROM cyclone_steps d WHERE d.run_id = s.run_id AND s.node_id = ANY (d.depends_on)))
         END
    FROM cyclone_runs r WHERE r.id = p_run_id;
$$;

-- Why a run that did not complete did not: cancelled, or the errors of its
-- discarded nodes (a code workflow's is its method's).
CREATE OR REPLACE FUNCTION cyclone_run_failure(p_run_id uuid) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT CASE r.state
           WHEN 'cancelled' THEN format('Run %s was cancelled', r.id)
           ELSE format('Run %s failed: %s', r.id,
                       (SELECT string_agg(format('%s (%s: %s)', s.node_id, coalesce(s.error_kind, 'error'),
                                                 coalesce(s.error, 'no message')), '; ' ORDER BY s.id)
                          FROM cyclone_steps s
                         WHERE s.run_id = r.id AND s.state = 'discarded'
                           AND (r.version IS NULL OR s.node_id = r.workflow)))
         END
    FROM cyclone_runs r WHERE r.id = p_run_id;
$$;

-- Child runs that finished (completed, failed or cancelled) complete the
-- waits their parents recorded for them (wf.result, a node named by the
-- child's run id), in the transaction that finished them, and wake the
-- parents. A wait not recorded yet finds the child finished when it is
-- (record-nodes.sql), which reads children under a share lock, so one of the
-- two always sees the other. A parent being cancelled is left out: its
-- waits are cancelled with it.
--
-- This writes rows of the parent without taking the parent run's lock: the
-- caller holds the child's, and a transaction that holds a parent's lock and
-- then waits for a child's (a cancel, a wf.result) takes it before writing
-- any of the parent's rows, so the two cannot wait on each other.
-- Its plans are kept, joins by key, for every caller (see complete-steps.sql).
-- Without partition pruning: a caller that holds only a child's lock can
-- meet a parent's row that another child's transaction changed meanwhile,
-- and PostgreSQL 18 would then drop the parents after it from the join
-- (see complete-steps.sql); not a hot path, so every month's index is
-- probed instead.
CREATE OR REPLACE FUNCTION cyclone_deliver_results(p_run_ids uuid[]) RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET jit = off
SET enable_partition_pruning = off
AS $$
DECLARE
  v_parents uuid[];
BEGIN
  WITH finished AS (
    SELECT c.id, c.parent_id, c.state FROM cyclone_runs c JOIN cyclone_runs p ON p.id = c.parent_id
     WHERE c.id = ANY (p_run_ids) AND c.state IN ('completed', 'failed', 'cancelled') AND p.state <> 'cancelled'
  ), delivered AS (
    UPDATE cyclone_steps s
       SET state = CASE WHEN f.state = 'completed' THEN 'completed' ELSE 'discarded' END, paused_state = NULL,
           output = CASE WHEN f.state = 'completed' THEN cyclone_run_output(f.id) END,
           error = CASE WHEN f.state <> 'completed' THEN cyclone_run_failure(f.id) END,
           error_kind = CASE WHEN f.state <> 'completed' THEN 'error' END,
           finished_at = now(), updated_at = now()
      FROM finished f
     WHERE s.run_id = f.parent_id AND s.node_id = f.id::text AND s.node_type = 'result'
       AND (s.state = 'waiting_signal' OR (s.state = 'paused' AND s.paused_state = 'waiting_signal'))
    RETURNING s.run_id
  )
  SELECT array_agg(DISTINCT run_id) INTO v_parents FROM delivered;
  IF v_parents IS NOT NULL THEN
    PERFORM cyclone_wake_workflows(v_parents);
  END IF;
END $$;
