-- Restores cyclone_ensure_partitions as version 6 defined it, and the default
-- autovacuum settings of the months of steps.
CREATE OR REPLACE FUNCTION cyclone_ensure_partitions(p_months_ahead integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  -- Month arithmetic on UTC timestamps: on timestamptz it would follow the session's time zone.
  v_this    timestamp := date_trunc('month', now() AT TIME ZONE 'UTC');
  v_from    timestamp;
  v_suffix  text;
  v_created integer := 0;
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
      -- complete, settle), so they can stay heap-only.
      EXECUTE format('CREATE TABLE %I PARTITION OF cyclone_runs FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 80)',
                     'cyclone_runs_' || v_suffix, cyclone_month_floor(v_from), cyclone_month_floor(v_from + interval '1 month'));
      EXECUTE format('CREATE TABLE %I PARTITION OF cyclone_steps FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 80)',
                     'cyclone_steps_' || v_suffix, cyclone_month_floor(v_from), cyclone_month_floor(v_from + interval '1 month'));
      v_created := v_created + 1;
      PERFORM set_config('lock_timeout', v_timeout, true);
    EXCEPTION WHEN lock_not_available THEN
      RAISE NOTICE 'cyclone_ensure_partitions: the tables are busy; month % is left for the next call', v_suffix;
    END;
  END LOOP;
  RETURN v_created;
END $$;

SELECT cyclone_set_queue_vacuum(i.inhrelid::regclass, false) FROM pg_inherits i WHERE i.inhparent = 'cyclone_steps'::regclass;

DROP FUNCTION IF EXISTS cyclone_set_queue_vacuum(regclass, boolean);
DROP FUNCTION IF EXISTS cyclone_queue_vacuum_options();

DELETE FROM cyclone_schema_migrations WHERE version = 7;
