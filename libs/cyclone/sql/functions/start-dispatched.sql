-- Starts the steps named by stream messages, in one statement per batch: the
-- claim's compare-and-set and lease stamping (cyclone_start_steps) for those
-- of them that are startable now: available, due, of a kind this client runs
-- without limits, not a code workflow's node, their queue not paused. The
-- rest (finished, cancelled, running elsewhere, a duplicate message, a paused
-- queue) are left as they are; the caller acknowledges their messages and
-- drops them. Rows are locked in id order, so two batches that share steps
-- (duplicate messages) never deadlock; the second finds them running.
--
-- A step still running under an expired lease lost its worker (seed 004:
-- "its Acquire succeeds because the lease has expired"): it is recovered
-- first, as the sweep would (cyclone_recover_step: a reclaim counted, or a
-- timeout consumed after p_retry_delay_ms unless the step stores its own
-- backoff), so the message that names it starts it; a reclaimed message
-- keeps counting its deliveries that way.
CREATE OR REPLACE FUNCTION cyclone_start_dispatched(p_run_ids uuid[], p_ids bigint[], p_kinds text[], p_owner text,
                                                    p_lease_ttl_ms bigint, p_retry_delay_ms bigint)
RETURNS TABLE (id bigint, run_id uuid, node_id text, kind text, attempt integer, max_attempts integer,
               reclaims integer, lease_generation bigint, timeout_ms bigint, input jsonb, upstream jsonb,
               trace_context jsonb, wait_ms float8)
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_lo   uuid := cyclone_lowest_id(p_run_ids);
  v_runs uuid[];
  v_ids  bigint[];
BEGIN
  PERFORM cyclone_recover_step(s.run_id, s.id, p_retry_delay_ms)
     FROM cyclone_steps s JOIN unnest(p_run_ids, p_ids) AS t(run_id, id) ON s.run_id = t.run_id AND s.id = t.id
    WHERE s.state = 'running' AND s.lease_expiry < now() AND s.kind = ANY (p_kinds) AND s.run_id >= v_lo;
  SELECT array_agg(c.run_id), array_agg(c.id) INTO v_runs, v_ids
    FROM (SELECT s.run_id, s.id FROM cyclone_steps s
            JOIN unnest(p_run_ids, p_ids) AS t(run_id, id) ON s.run_id = t.run_id AND s.id = t.id
           WHERE s.state = 'available' AND s.scheduled_at <= now() AND s.flow_key IS NULL
             AND s.node_type <> 'workflow' AND s.kind = ANY (p_kinds) AND s.run_id >= v_lo
             AND NOT EXISTS (SELECT 1 FROM cyclone_paused_queues p WHERE p.queue = s.queue)
           ORDER BY s.id
             FOR UPDATE OF s) c;
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT * FROM cyclone_start_steps(v_runs, v_ids, p_owner, p_lease_ttl_ms);
END $$;
