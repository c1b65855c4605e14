-- The claim of code workflows' own nodes (a pass of the method: replay up to
-- where it stopped, then on): up to p_limit available workflow nodes of the
-- queue, of the workflows this client runs, in the plain claim's order,
-- started as cyclone_start_steps starts any step (lease, generation, the
-- database clock). A run started by a newer version of its workflow than this
-- client's (p_versions, by name in p_workflows) is left for a client that has
-- that version: the code here may not know the calls that run has recorded.
--
-- The plain claim (claim-steps.sql) is not asked to tell versions apart: it
-- never sees a workflow's name among its kinds, so its statement stays as it
-- was for queues of plain steps. Available workflow nodes are few (a run's
-- node is available only between a wake-up and its pass) and indexed apart
-- (cyclone_steps_workflows), so this claim does not walk a backlog of steps.
CREATE OR REPLACE FUNCTION cyclone_claim_workflows(p_queue text, p_workflows text[], p_versions integer[], p_limit integer,
                                                   p_owner text, p_lease_ttl_ms bigint)
RETURNS TABLE (id bigint, run_id uuid, node_id text, kind text, attempt integer, max_attempts integer,
               reclaims integer, lease_generation bigint, timeout_ms bigint, input jsonb, upstream jsonb,
               trace_context jsonb, wait_ms float8)
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_low    uuid;
  v_paused boolean;
  v_runs   uuid[];
  v_ids    bigint[];
BEGIN
  SELECT f.low, EXISTS (SELECT 1 FROM cyclone_paused_queues p WHERE p.queue = p_queue)
    INTO v_low, v_paused FROM cyclone_claim_floor f;
  IF v_paused THEN
    RETURN;
  END IF;
  SELECT array_agg(c.run_id), array_agg(c.id) INTO v_runs, v_ids
    FROM (SELECT s.run_id, s.id
            FROM cyclone_steps s
            JOIN unnest(p_workflows, p_versions) AS w(name, version) ON w.name = s.kind
            JOIN cyclone_runs r ON r.id = s.run_id AND r.id >= v_low
           WHERE s.state = 'available' AND s.node_type = 'workflow' AND s.queue = p_queue
             AND s.scheduled_at <= now() AND s.run_id >= v_low AND r.version <= w.version
           ORDER BY s.priority DESC, s.scheduled_at, s.id
           LIMIT p_limit
             FOR UPDATE OF s SKIP LOCKED) c;
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT * FROM cyclone_start_steps(v_runs, v_ids, p_owner, p_lease_ttl_ms);
END $$;
