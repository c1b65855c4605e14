-- Restores the keep-paused row trigger and the four writes as version 9
-- defined them. Runs then steps are locked first, as the up does.

LOCK TABLE cyclone_runs, cyclone_steps IN ACCESS EXCLUSIVE MODE;

CREATE OR REPLACE FUNCTION cyclone_fail_step(p_run_id uuid, p_step_id bigint, p_owner text, p_generation bigint,
                                             p_error text, p_error_kind text, p_retry_delay_ms bigint)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_run_id uuid;
  v_state  text;
BEGIN
  v_run_id := cyclone_lock_run(p_run_id);
  IF v_run_id IS NULL THEN
    RETURN NULL;
  END IF;

  UPDATE cyclone_steps s
     SET state        = f.next_state,
         attempt      = CASE WHEN f.next_state = 'discarded' THEN s.attempt ELSE s.attempt + 1 END,
         scheduled_at = CASE WHEN f.next_state = 'discarded' THEN s.scheduled_at
                             ELSE now() + COALESCE(s.backoff_ms[s.attempt], p_retry_delay_ms)
                                          * interval '1 millisecond' END,
         finished_at  = CASE WHEN f.next_state = 'discarded' THEN now() END,
         error        = p_error,
         error_kind   = f.error_kind,
         lease_owner  = NULL,
         lease_expiry = NULL,
         updated_at   = now()
    FROM (SELECT CASE WHEN timeout IS NOT NULL AND started_at + timeout <= now() THEN 'timeout'
                      ELSE p_error_kind END AS error_kind,
                 CASE WHEN p_error_kind = 'permanent' OR attempt >= max_attempts THEN 'discarded'
                      ELSE 'available' END AS next_state
            FROM cyclone_steps WHERE run_id = p_run_id AND id = p_step_id) f
   WHERE s.run_id = p_run_id AND s.id = p_step_id AND s.state = 'running'
     AND s.lease_owner = p_owner AND s.lease_generation = p_generation
  RETURNING s.state INTO v_state;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;

  IF v_state = 'discarded' THEN
    PERFORM cyclone_settle_run(v_run_id);
  END IF;
  RETURN v_state;
END $$;

CREATE OR REPLACE FUNCTION cyclone_snooze_step(p_run_id uuid, p_step_id bigint, p_owner text, p_generation bigint,
                                               p_delay_ms bigint)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF cyclone_lock_run(p_run_id) IS NULL THEN
    RETURN false;
  END IF;
  UPDATE cyclone_steps
     SET state = 'available', scheduled_at = now() + p_delay_ms * interval '1 millisecond',
         lease_owner = NULL, lease_expiry = NULL, updated_at = now()
   WHERE run_id = p_run_id AND id = p_step_id AND state = 'running'
     AND lease_owner = p_owner AND lease_generation = p_generation;
  RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION cyclone_hand_back(p_run_ids uuid[], p_ids bigint[], p_owner text, p_generations bigint[])
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_queues text[];
BEGIN
  PERFORM cyclone_lock_runs(p_run_ids);
  WITH handed AS (
    UPDATE cyclone_steps s
       SET state = 'available', lease_owner = NULL, lease_expiry = NULL, updated_at = now()
      FROM unnest(p_run_ids, p_ids, p_generations) AS t(run_id, id, generation)
     WHERE s.run_id = t.run_id AND s.id = t.id AND s.state = 'running' AND s.lease_owner = p_owner AND s.lease_generation = t.generation
    RETURNING s.queue
  )
  SELECT array_agg(queue) INTO v_queues FROM handed;
  PERFORM pg_notify('cyclone_wake', queue) FROM (SELECT DISTINCT unnest(v_queues) AS queue) q;
  RETURN coalesce(cardinality(v_queues), 0);
END $$;

CREATE OR REPLACE FUNCTION cyclone_recover_step(p_run_id uuid, p_step_id bigint, p_retry_delay_ms bigint)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_run_id  uuid;
  v_step    cyclone_steps%ROWTYPE;
  v_outcome text;
BEGIN
  v_run_id := cyclone_lock_run(p_run_id);
  IF v_run_id IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT * INTO v_step FROM cyclone_steps WHERE run_id = p_run_id AND id = p_step_id FOR UPDATE;
  IF v_step.state IS DISTINCT FROM 'running' THEN
    RETURN NULL;
  END IF;

  IF v_step.timeout IS NOT NULL AND v_step.started_at + v_step.timeout <= now() THEN
    -- The attempt ran out of time on the database clock: consumed, exactly as
    -- a failure the worker reports (its lease is the one we hold locked).
    v_outcome := CASE cyclone_fail_step(p_run_id, p_step_id, v_step.lease_owner, v_step.lease_generation,
                                        'Step timed out after ' || v_step.timeout || ' (recovered by the sweep)',
                                        'timeout', p_retry_delay_ms)
                   WHEN 'discarded' THEN 'timeout_discarded' ELSE 'timeout' END;
    RETURN v_outcome;
  ELSIF v_step.lease_expiry < now() THEN
    IF v_step.max_reclaims IS NOT NULL AND v_step.reclaims >= v_step.max_reclaims THEN
      -- A step that keeps killing its workers must not loop forever.
      v_outcome := 'reclaim_limit';
      UPDATE cyclone_steps
         SET state = 'discarded', finished_at = now(),
             error = 'Lease expired after ' || reclaims || ' reclaim(s); maxReclaims is ' || max_reclaims,
             error_kind = 'reclaim_limit',
             lease_owner = NULL, lease_expiry = NULL, updated_at = now()
       WHERE run_id = p_run_id AND id = p_step_id;
      PERFORM cyclone_settle_run(v_run_id);
    ELSE
      -- A crash is not a failure: same attempt, no backoff, claimable at once.
      v_outcome := 'reclaimed';
      UPDATE cyclone_steps
         SET state = 'available', reclaims = reclaims + 1,
             lease_owner = NULL, lease_expiry = NULL, updated_at = now()
       WHERE run_id = p_run_id AND id = p_step_id;
      PERFORM pg_notify('cyclone_wake', v_step.queue);
    END IF;
    RETURN v_outcome;
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION cyclone_keep_paused() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM cyclone_runs WHERE id = NEW.run_id AND state = 'paused') THEN
    NEW.paused_state := NEW.state;
    NEW.state := 'paused';
  END IF;
  RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER cyclone_steps_keep_paused
  BEFORE UPDATE OF state ON cyclone_steps
  FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.state = 'available')
  EXECUTE FUNCTION cyclone_keep_paused();

DROP FUNCTION IF EXISTS cyclone_keep_paused(uuid, text);

DELETE FROM cyclone_schema_migrations WHERE version = 10;
