-- Completes many steps of one worker, each named by its run and its id
-- (arrays in the same order): a compare-and-set on each step's lease
-- (owner, generation, and the timeout on the database clock), so a late or
-- duplicate completion changes nothing. The runs are locked first; routing
-- and the runs' state changes commit with the steps. Returns the ids of the
-- steps it completed. A single completion is a batch of one: there is one
-- completion path.
CREATE OR REPLACE FUNCTION cyclone_complete_steps(p_run_ids uuid[], p_ids bigint[], p_owner text,
                                                  p_generations bigint[], p_outputs jsonb[])
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_ids  bigint[] := '{}';
  v_runs uuid[] := '{}';
  v_run  uuid;
BEGIN
  PERFORM cyclone_lock_runs(p_run_ids);

  -- One primary-key lookup per step. A join with the arrays leaves the plan
  -- to the table's statistics, and on a young table (not analysed yet) or a
  -- freshly vacuumed one they made the planner scan the table for every batch.
  FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
    UPDATE cyclone_steps
       SET state = 'completed', output = p_outputs[i], error = NULL, error_kind = NULL,
           finished_at = now(), updated_at = now(), lease_expiry = NULL
     WHERE run_id = p_run_ids[i] AND id = p_ids[i] AND state = 'running'
       AND lease_owner = p_owner AND lease_generation = p_generations[i]
       AND (timeout IS NULL OR started_at + timeout > now())
    RETURNING run_id INTO v_run;
    IF FOUND THEN
      v_ids := v_ids || p_ids[i];
      v_runs := v_runs || v_run;
    END IF;
  END LOOP;
  IF cardinality(v_ids) = 0 THEN
    RETURN;
  END IF;

  PERFORM cyclone_release_successors(v_runs);
  PERFORM cyclone_settle_runs(v_runs);
  RETURN QUERY SELECT unnest(v_ids);
END $$;
