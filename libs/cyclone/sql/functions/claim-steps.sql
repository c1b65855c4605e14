-- The claim: as many available steps of a queue and of the kinds this
-- client runs as it has free slots, in claim order (priority, then due
-- time, then age). SKIP LOCKED lets many workers claim side by side without
-- waiting on each other's rows; all times are the database's. The lease
-- generation is bumped so that every later write of this attempt can
-- compare-and-set on it. Upstream outputs are read only for workflow nodes
-- that have upstreams. A paused queue (pauseQueue) claims nothing. Steps of
-- kinds with limits (flow_key set) are cyclone_claim_flow's. A new
-- attempt starts without the progress an earlier one reported; it returns the
-- run's trace context (for the attempt's span) and how long the step waited
-- since it was due.
--
-- A function for its planner settings: planned afresh on each call, a
-- statement over every month's partitions costs about a millisecond to plan,
-- more than claiming a few steps; so its plan is made once per connection,
-- and as that plan cannot see the batch size, its joins are held to nested
-- loops over the keys. (A claim of one step took 1.5 ms planned each time,
-- 0.4 ms with the kept plan.)
CREATE OR REPLACE FUNCTION cyclone_claim_steps(p_queue text, p_kinds text[], p_limit integer, p_owner text,
                                               p_lease_ttl_ms bigint)
RETURNS TABLE (id bigint, run_id uuid, node_id text, kind text, attempt integer, max_attempts integer,
               reclaims integer, lease_generation bigint, timeout_ms bigint, input jsonb, upstream jsonb,
               trace_context jsonb, wait_ms float8)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH picked AS (
    SELECT c.run_id, c.id FROM cyclone_steps c
     WHERE c.state = 'available' AND c.flow_key IS NULL AND c.queue = p_queue AND c.kind = ANY (p_kinds)
       AND c.scheduled_at <= now()
       AND NOT EXISTS (SELECT 1 FROM cyclone_paused_queues p WHERE p.queue = p_queue)
     ORDER BY c.priority DESC, c.scheduled_at, c.id
     LIMIT p_limit
     FOR UPDATE SKIP LOCKED
  )
  UPDATE cyclone_steps s
     SET state = 'running',
         lease_owner = p_owner,
         lease_generation = s.lease_generation + 1,
         lease_expiry = now() + p_lease_ttl_ms * interval '1 millisecond',
         started_at = now(),
         heartbeat_at = now(),
         progress = NULL,
         updated_at = now()
    FROM picked, cyclone_runs r
   WHERE s.run_id = picked.run_id AND s.id = picked.id AND r.id = s.run_id
  RETURNING s.id, s.run_id, s.node_id, s.kind, s.attempt, s.max_attempts, s.reclaims, s.lease_generation,
            (extract(epoch FROM s.timeout) * 1000)::bigint,
            r.input,
            CASE WHEN cardinality(s.depends_on) > 0 THEN
              (SELECT jsonb_object_agg(u.node_id, u.output) FROM cyclone_steps u
                WHERE u.run_id = s.run_id AND u.node_id = ANY (s.depends_on))
            END,
            r.trace_context,
            (extract(epoch FROM now() - s.scheduled_at) * 1000)::float8;
END $$;
