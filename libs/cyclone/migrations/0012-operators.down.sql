-- Restores version 11: the tables of version 12 are dropped (a month's
-- attempts with them), and the functions it replaced are restated as version
-- 11 defined them.

DROP FUNCTION IF EXISTS cyclone_enqueue(text, jsonb, jsonb);
DROP FUNCTION IF EXISTS cyclone_uuid7();
DROP FUNCTION IF EXISTS cyclone_option_name(jsonb, text);
DROP FUNCTION IF EXISTS cyclone_option_integer(jsonb, text, integer, integer);
DROP FUNCTION IF EXISTS cyclone_option_ms(jsonb, text, boolean);
DROP FUNCTION IF EXISTS cyclone_option_time(jsonb, text);
DROP FUNCTION IF EXISTS cyclone_insert_jobs(uuid[], text[], jsonb[], text[], text[], bigint[], smallint[], integer[],
                                            integer[], bigint[], timestamptz[], bigint[], jsonb[], text[], text[], text[], boolean);
DROP FUNCTION IF EXISTS cyclone_fail_step(uuid, bigint, text, bigint, text, text, bigint, text);

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
     SET (state, paused_state) = (SELECT k.state, k.paused_state FROM cyclone_keep_paused(p_run_id, f.next_state) k),
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
      -- A crash is not a failure: same attempt, no backoff, claimable at once
      -- (on resume, if the run is paused: keep-paused.sql).
      v_outcome := 'reclaimed';
      UPDATE cyclone_steps s
         SET (state, paused_state) = (SELECT k.state, k.paused_state FROM cyclone_keep_paused(p_run_id, 'available') k),
             reclaims = s.reclaims + 1,
             lease_owner = NULL, lease_expiry = NULL, updated_at = now()
       WHERE s.run_id = p_run_id AND s.id = p_step_id;
      PERFORM pg_notify('cyclone_wake', v_step.queue);
    END IF;
    RETURN v_outcome;
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION cyclone_cancel_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
BEGIN
  SELECT state INTO v_state FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS NULL OR v_state IN ('completed', 'cancelled') THEN
    RETURN v_state;
  END IF;

  UPDATE cyclone_steps
     SET state = 'cancelled', paused_state = NULL, lease_expiry = NULL,
         finished_at = now(), updated_at = now()
   WHERE run_id = p_run_id AND state NOT IN ('completed', 'discarded', 'cancelled');

  UPDATE cyclone_runs
     SET state = 'cancelled', updated_at = now(), finished_at = now(), delete_after = now() + retention
   WHERE id = p_run_id;
  DELETE FROM cyclone_unique_keys WHERE run_id = p_run_id;
  PERFORM pg_notify('cyclone_run_finished', p_run_id::text);
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
  UPDATE cyclone_steps s
     SET (state, paused_state) = (SELECT k.state, k.paused_state FROM cyclone_keep_paused(p_run_id, 'available') k),
         scheduled_at = now() + p_delay_ms * interval '1 millisecond',
         lease_owner = NULL, lease_expiry = NULL, updated_at = now()
   WHERE s.run_id = p_run_id AND s.id = p_step_id AND s.state = 'running'
     AND s.lease_owner = p_owner AND s.lease_generation = p_generation;
  RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION cyclone_ensure_partitions(p_months_ahead integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  -- Month arithmetic on UTC timestamps: on timestamptz it would follow the session's time zone.
  v_this    timestamp := date_trunc('month', now() AT TIME ZONE 'UTC');
  v_from    timestamp;
  v_suffix  text;
  v_created integer := 0;
  v_steps   regclass;
  v_timeout text := current_setting('lock_timeout');
BEGIN
  PERFORM pg_advisory_xact_lock(7482001772);
  FOR m IN -1 .. p_months_ahead LOOP
    v_from := v_this + make_interval(months => m);
    v_suffix := to_char(v_from, '"y"YYYY"m"MM');
    CONTINUE WHEN to_regclass('cyclone_runs_' || v_suffix) IS NOT NULL;
    BEGIN
      PERFORM set_config('lock_timeout', '100ms', true);
      -- Room on each page for the updates a run and its steps get (claim,
      -- heartbeat, complete, settle).
      EXECUTE format('CREATE TABLE %I PARTITION OF cyclone_runs FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 80)',
                     'cyclone_runs_' || v_suffix, cyclone_month_floor(v_from), cyclone_month_floor(v_from + interval '1 month'));
      EXECUTE format('CREATE TABLE %I PARTITION OF cyclone_steps FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 80)',
                     'cyclone_steps_' || v_suffix, cyclone_month_floor(v_from), cyclone_month_floor(v_from + interval '1 month'));
      PERFORM cyclone_set_queue_vacuum(('cyclone_steps_' || v_suffix)::regclass, true);
      v_created := v_created + 1;
      PERFORM set_config('lock_timeout', v_timeout, true);
    EXCEPTION WHEN lock_not_available THEN
      RAISE NOTICE 'cyclone_ensure_partitions: the tables are busy; month % is left for the next call', v_suffix;
    END;
  END LOOP;
  FOR v_steps IN
    SELECT c.oid::regclass FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'cyclone_steps'::regclass
       AND coalesce(c.reloptions, '{}') @> cyclone_queue_vacuum_options()
       AND to_date(substr(c.relname, length('cyclone_steps_') + 1), '"y"YYYY"m"MM') < v_this - interval '1 month'
  LOOP
    BEGIN
      -- A vacuum of the month holds the lock this needs: it waits 100 ms at most, as above.
      PERFORM set_config('lock_timeout', '100ms', true);
      PERFORM cyclone_set_queue_vacuum(v_steps, false);
      PERFORM set_config('lock_timeout', v_timeout, true);
    EXCEPTION WHEN lock_not_available THEN
      RAISE NOTICE 'cyclone_ensure_partitions: % is busy; its vacuum settings are left for the next call', v_steps;
    END;
  END LOOP;
  RETURN v_created;
END $$;

CREATE OR REPLACE FUNCTION cyclone_drop_partitions(p_older_than timestamptz) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
  v_month   record;
  v_steps   text;
  v_timeout text := current_setting('lock_timeout');
BEGIN
  PERFORM pg_advisory_xact_lock(7482001772);
  FOR v_month IN
    SELECT * FROM cyclone_partitions(p_older_than)
     WHERE ended_before AND NOT live_runs
       AND month < (date_trunc('month', now() AT TIME ZONE 'UTC') - interval '1 month') AT TIME ZONE 'UTC'
  LOOP
    v_steps := 'cyclone_steps_' || substr(v_month.name, length('cyclone_runs_') + 1);
    BEGIN
      PERFORM set_config('lock_timeout', '100ms', true);
      EXECUTE format('DROP TABLE IF EXISTS %I, %I', v_steps, v_month.name);
      PERFORM set_config('lock_timeout', v_timeout, true);
      RETURN NEXT v_steps;
      RETURN NEXT v_month.name;
    EXCEPTION WHEN lock_not_available THEN
      RAISE NOTICE 'cyclone_drop_partitions: % is busy; it is left for the next call', v_month.name;
    END;
  END LOOP;
END $$;

DROP FUNCTION IF EXISTS cyclone_record_attempt(uuid, bigint, integer, timestamptz, text, text, text, text, text);
DROP TABLE IF EXISTS cyclone_attempts, cyclone_clients, cyclone_step_kinds;

DELETE FROM cyclone_schema_migrations WHERE version = 12;
