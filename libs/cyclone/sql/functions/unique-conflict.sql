-- An enqueue whose unique key an unfinished run holds, with onConflict
-- 'keep' or 'replace' or a debounce: acts on the holder under its run lock
-- and its step's lock, and never raises, so it can run inside a caller's
-- transaction. A holder that has not started yet (its step never ran) takes
-- the new input and the keys computed from it ('replace'), and is pushed
-- back to start p_debounce_ms from now (debounce); one that has started is
-- left as it is. Returns the holder and what was done: 'kept', 'replaced',
-- 'debounced', 'started' (it could not be replaced), or a NULL holder when
-- the key was freed meanwhile (the caller inserts again).
CREATE OR REPLACE FUNCTION cyclone_unique_conflict(p_unique_key text, p_kind text, p_replace boolean,
                                                   p_input jsonb, p_flow_key text, p_rate_key text,
                                                   p_debounce_ms bigint)
RETURNS TABLE (holder uuid, outcome text)
LANGUAGE plpgsql AS $$
DECLARE
  v_run   cyclone_runs%ROWTYPE;
  v_step  cyclone_steps%ROWTYPE;
BEGIN
  holder := (SELECT k.run_id FROM cyclone_unique_keys k WHERE k.unique_key = p_unique_key);
  IF holder IS NULL THEN
    RETURN NEXT;
    RETURN;
  END IF;
  IF NOT p_replace AND p_debounce_ms IS NULL THEN
    outcome := 'kept';
    RETURN NEXT;
    RETURN;
  END IF;

  SELECT * INTO v_run FROM cyclone_runs r WHERE r.id = holder FOR UPDATE;
  -- The holder finished and freed the key while we waited for its lock.
  IF v_run.state IS NULL OR v_run.state IN ('completed', 'failed', 'cancelled') THEN
    holder := NULL;
    RETURN NEXT;
    RETURN;
  END IF;
  -- Only a standalone job of the same kind can take this enqueue's input.
  SELECT * INTO v_step FROM cyclone_steps s WHERE s.run_id = holder AND v_run.kind = p_kind FOR UPDATE;
  IF v_step.id IS NULL OR v_step.started_at IS NOT NULL
     OR NOT (v_step.state = 'available' OR (v_step.state = 'paused' AND v_step.paused_state = 'available')) THEN
    outcome := CASE WHEN p_replace THEN 'started' ELSE 'kept' END;
    RETURN NEXT;
    RETURN;
  END IF;

  IF p_replace THEN
    UPDATE cyclone_runs SET input = p_input, updated_at = now() WHERE id = holder;
    UPDATE cyclone_steps SET flow_key = p_flow_key, rate_key = p_rate_key, updated_at = now()
     WHERE run_id = holder AND id = v_step.id;
  END IF;
  IF p_debounce_ms IS NOT NULL THEN
    UPDATE cyclone_steps SET scheduled_at = now() + p_debounce_ms * interval '1 millisecond', updated_at = now()
     WHERE run_id = holder AND id = v_step.id;
  END IF;
  outcome := CASE WHEN p_replace THEN 'replaced' ELSE 'debounced' END;
  RETURN NEXT;
END $$;
