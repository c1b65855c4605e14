-- The start of a pass of a code workflow: every node the run has recorded, in
-- one statement, the workflow's own node first (with the version the run
-- recorded, and the delay its last suspension asked of its wake-up). Returns nothing when the pass's lease (owner and generation of
-- its claim) is no longer held.
--
-- The order in which the method learns of finished nodes must be the same
-- on every replay, or a Promise.race, or the first failure of a Promise.all,
-- could go another way than it went the first time. So a node gets its place
-- in that order (observed) when a pass first learns that it finished: the
-- nodes that finished since the last pass get theirs here, in the order
-- they finished; the nodes a pass records itself, and those its suspension
-- finds finished, get theirs from the pass (record-nodes.sql). A replay hands
-- the method results in this order, whenever they finished.
-- Its plans are kept, as record-nodes.sql says.
CREATE OR REPLACE FUNCTION cyclone_load_history(p_run_id uuid, p_node_id text, p_owner text, p_generation bigint)
RETURNS TABLE (node_id text, node_type text, kind text, state text, output jsonb, error text, error_kind text,
               attempt integer, max_attempts integer, observed integer, version integer, wake_delay_ms integer)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_next integer;
BEGIN
  -- The pass's own node, locked: a holder that lost the lease numbers nothing.
  PERFORM 1 FROM cyclone_steps w
   WHERE w.run_id = p_run_id AND w.node_id = p_node_id AND w.state = 'running'
     AND w.lease_owner = p_owner AND w.lease_generation = p_generation
     FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  SELECT coalesce(max(s.observed), 0) + 1 INTO v_next FROM cyclone_steps s WHERE s.run_id = p_run_id;
  UPDATE cyclone_steps s
     SET observed = v_next + o.n - 1
    FROM (SELECT u.id, row_number() OVER (ORDER BY u.finished_at, u.id) AS n
            FROM cyclone_steps u
           WHERE u.run_id = p_run_id AND u.observed IS NULL AND u.node_type <> 'workflow'
             AND u.state IN ('completed', 'discarded', 'cancelled')) o
   WHERE s.run_id = p_run_id AND s.id = o.id;
  RETURN QUERY
  SELECT s.node_id, s.node_type, s.kind, s.state, s.output, s.error, s.error_kind, s.attempt, s.max_attempts, s.observed,
         CASE WHEN s.node_type = 'workflow' THEN (SELECT r.version FROM cyclone_runs r WHERE r.id = p_run_id) END,
         s.wake_delay_ms
    FROM cyclone_steps s
   WHERE s.run_id = p_run_id
   ORDER BY s.node_type <> 'workflow', s.id;
END $$;
