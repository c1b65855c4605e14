-- Restores the completion of version 20 (one pass, and the batch's steps
-- updated even when it deleted them all), and partition pruning in the
-- delivery of a child's result to its code workflow.

CREATE OR REPLACE FUNCTION cyclone_complete_steps(p_run_ids uuid[], p_ids bigint[], p_owner text,
                                                  p_generations bigint[], p_outputs jsonb[])
RETURNS TABLE (id bigint, generation bigint)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_lo     uuid := cyclone_lowest_id(p_run_ids);
  v_runs   uuid[];
  v_ids    bigint[];
  v_gens   bigint[];
  v_done   uuid[];
  v_notify uuid[];
  v_child  uuid[];
  v_drop   uuid[];
BEGIN
  -- The runs' locks first, in id order (cyclone_lock_runs, here so its plan is kept too). The
  -- runs are joined by key, here and in the delete below: with `id = ANY` the kept plan read a
  -- month of retention 0, whose statistics show it nearly empty, through another index from
  -- the batch's oldest id on, past every run deleted since (745 buffers under a held snapshot).
  SELECT array_agg(r.id) FILTER (WHERE r.drop) INTO v_drop
    FROM (SELECT r.id, r.retention = interval '0' AND r.workflow IS NULL AND NOT r.notify_finish AND r.parent_id IS NULL
                   AND r.state IN ('running', 'paused') AS drop
            FROM (SELECT DISTINCT u AS id FROM unnest(p_run_ids) AS u) t JOIN cyclone_runs r ON r.id = t.id
           WHERE r.id >= v_lo ORDER BY r.id FOR UPDATE OF r) r;

  IF v_drop IS NOT NULL THEN
    WITH gone AS (
      DELETE FROM cyclone_steps s
       USING unnest(p_run_ids, p_ids, p_generations) AS t(run_id, id, generation)
       WHERE s.run_id = t.run_id AND s.id = t.id AND s.run_id = ANY (v_drop) AND s.run_id >= v_lo AND s.state = 'running'
         AND s.lease_owner = p_owner AND s.lease_generation = t.generation
         AND (s.timeout IS NULL OR s.started_at + s.timeout > now())
      RETURNING s.run_id, s.id, s.lease_generation
    )
    SELECT array_agg(g.run_id), array_agg(g.id), array_agg(g.lease_generation) INTO v_drop, v_ids, v_gens FROM gone g;
  END IF;
  IF v_drop IS NOT NULL THEN
    DELETE FROM cyclone_attempts a WHERE a.run_id = ANY (v_drop) AND a.run_id >= v_lo;
    WITH runs AS (
      DELETE FROM cyclone_runs r USING unnest(v_drop) AS t(id) WHERE r.id = t.id AND r.id >= v_lo
      RETURNING r.id, r.unique_key
    )
    DELETE FROM cyclone_unique_keys k USING runs WHERE runs.unique_key IS NOT NULL AND k.unique_key = runs.unique_key AND k.run_id = runs.id;
  END IF;

  WITH completed AS (
    UPDATE cyclone_steps s
       SET state = 'completed', output = t.output, error = NULL, error_kind = NULL,
           finished_at = now(), updated_at = now(), lease_expiry = NULL
      FROM unnest(p_run_ids, p_ids, p_generations, p_outputs) AS t(run_id, id, generation, output)
     WHERE s.run_id = t.run_id AND s.id = t.id AND s.run_id >= v_lo AND s.state = 'running'
       AND s.lease_owner = p_owner AND s.lease_generation = t.generation
       AND (s.timeout IS NULL OR s.started_at + s.timeout > now())
    RETURNING s.run_id, s.id, s.lease_generation
  )
  SELECT array_agg(c.run_id), coalesce(v_ids, '{}') || array_agg(c.id), coalesce(v_gens, '{}') || array_agg(c.lease_generation)
    INTO v_runs, v_ids, v_gens FROM completed c;
  IF v_runs IS NULL THEN
    RETURN QUERY SELECT * FROM unnest(v_ids, v_gens);
    RETURN;
  END IF;

  -- A standalone job's run completes with its one step: no routing, no
  -- counting of its steps. (A paused run may complete: nothing is left to hold.)
  -- A job a code workflow started as its child tells its parent.
  WITH finished AS (
    UPDATE cyclone_runs r
       SET state = 'completed', updated_at = now(), finished_at = now(),
           delete_after = now() + cyclone_kept_for(r.retention, 'completed', r.notify_finish)
     WHERE r.id = ANY (v_runs) AND r.id >= v_lo AND r.workflow IS NULL AND r.state IN ('running', 'paused')
    RETURNING r.id, r.notify_finish, r.unique_key, r.parent_id
  ), freed AS (
    DELETE FROM cyclone_unique_keys k
     USING finished f
     WHERE f.unique_key IS NOT NULL AND k.unique_key = f.unique_key AND k.run_id = f.id
  )
  SELECT array_agg(f.id), array_agg(f.id) FILTER (WHERE f.notify_finish), array_agg(f.id) FILTER (WHERE f.parent_id IS NOT NULL)
    INTO v_done, v_notify, v_child FROM finished f;
  PERFORM pg_notify('cyclone_run_finished', finished_id::text) FROM unnest(v_notify) AS finished_id;
  IF v_child IS NOT NULL THEN
    PERFORM cyclone_deliver_results(v_child);
  END IF;

  -- The rest are workflow runs: route below the completed nodes, then settle.
  v_runs := ARRAY(SELECT unnest(v_runs) EXCEPT SELECT unnest(v_done));
  IF cardinality(v_runs) > 0 THEN
    PERFORM cyclone_release_successors(v_runs);
    PERFORM cyclone_settle_runs(v_runs);
  END IF;
  RETURN QUERY SELECT * FROM unnest(v_ids, v_gens);
END $$;

ALTER FUNCTION cyclone_deliver_results(uuid[]) RESET enable_partition_pruning;
ALTER FUNCTION cyclone_wake_workflows(uuid[]) RESET enable_partition_pruning;

DELETE FROM cyclone_schema_migrations WHERE version = 21;
