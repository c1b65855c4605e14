-- Monthly partitions of the run-scoped tables (cyclone_runs on id,
-- cyclone_steps and cyclone_attempts on run_id). A month's partitions hold
-- the runs whose UUIDv7 id was made in that month (UTC), their steps and
-- their steps' attempts. Both functions below
-- take one advisory lock for the transaction, so replicas may call them
-- together: one creates or drops, the others then find nothing to do.

-- The smallest UUIDv7 of a moment given in UTC: its 48-bit millisecond
-- timestamp, then zeros. A month's partition holds [floor(month), floor(next month)).
CREATE OR REPLACE FUNCTION cyclone_month_floor(p_utc timestamp) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$
  SELECT (substr(ms, 1, 8) || '-' || substr(ms, 9, 4) || '-0000-0000-000000000000')::uuid
    FROM lpad(to_hex((extract(epoch FROM p_utc) * 1000)::bigint), 12, '0') AS ms;
$$;

-- The month (UTC) whose partitions hold a run: its id's 48-bit millisecond timestamp, truncated.
CREATE OR REPLACE FUNCTION cyclone_run_month(p_run_id uuid) RETURNS timestamp
LANGUAGE sql IMMUTABLE AS $$
  SELECT date_trunc('month', to_timestamp(('x' || substr(replace(p_run_id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0)
                             AT TIME ZONE 'UTC');
$$;

-- A month of steps is a queue as well as history: each claim leaves a dead
-- entry at the head of the claim index (cyclone_steps_claim), which every
-- later claim reads past until a vacuum removes it. By default autovacuum
-- waits for a fifth of a table to be dead, and this month's steps include
-- all of this month's history, so that head could grow to millions of
-- entries; and when the dead rows sit on few of its pages (under 2 %), a
-- vacuum leaves the indexes alone. So while a month is claimed from, its
-- steps are vacuumed after a fixed number of dead rows, whatever their
-- size, and their indexes with them (a claim that found nothing due behind
-- 40,000 claimed steps, in a month of 2.5 million, read 228 pages; after
-- such a vacuum, 12). Once the month has ended, few claims read it, and
-- retention's deletes would have its indexes read through every 10,000
-- rows: it goes back to the server's settings (cyclone_ensure_partitions).
CREATE OR REPLACE FUNCTION cyclone_queue_vacuum_options() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
  SELECT ARRAY['autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=10000', 'vacuum_index_cleanup=on']
$$;

-- Gives a month of steps the queue's vacuum settings, or (p_on false) the server's back.
CREATE OR REPLACE FUNCTION cyclone_set_queue_vacuum(p_steps regclass, p_on boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF p_on THEN
    EXECUTE format('ALTER TABLE %s SET (%s)', p_steps, array_to_string(cyclone_queue_vacuum_options(), ', '));
  ELSE
    EXECUTE format('ALTER TABLE %s RESET (%s)', p_steps,
                   (SELECT string_agg(split_part(o, '=', 1), ', ') FROM unnest(cyclone_queue_vacuum_options()) AS o));
  END IF;
END $$;

-- Creates the partitions of the current month, the month before (a client
-- whose clock is a little behind makes ids in it just after the turn of the
-- month) and p_months_ahead months after it, where missing, and gives the
-- steps of months older than those back the server's vacuum settings (see
-- cyclone_queue_vacuum_options; a month whose settings someone changed is
-- left as it is). Returns how many months it created.
--
-- Adding a partition takes an exclusive lock on the parent tables for a
-- moment, and every statement on them queues behind the request; statements
-- that hold one table and want the other could deadlock with it. So it waits
-- at most 100 ms for the locks, below the server's deadlock_timeout: when it
-- and a transaction wait on each other, it is always this call that gives
-- up, never the application's statement. A month it could not add is added
-- by a later call, months before it is needed.
CREATE OR REPLACE FUNCTION cyclone_ensure_partitions(p_months_ahead integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  -- Month arithmetic on UTC timestamps: on timestamptz it would follow the session's time zone.
  v_this    timestamp := date_trunc('month', now() AT TIME ZONE 'UTC');
  v_from    timestamp;
  v_to      timestamp;
  v_suffix  text;
  v_created integer := 0;
  v_steps   regclass;
  v_timeout text := current_setting('lock_timeout');
BEGIN
  PERFORM pg_advisory_xact_lock(7482001772);
  FOR v_from IN
    SELECT v_this + make_interval(months => m) FROM generate_series(-1, p_months_ahead) AS m
    UNION
    -- Months made before attempts were kept (version 11) get their attempts' partition.
    SELECT to_date(substr(c.relname, length('cyclone_runs_') + 1), '"y"YYYY"m"MM')::timestamp
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'cyclone_runs'::regclass
       AND to_regclass('cyclone_attempts_' || substr(c.relname, length('cyclone_runs_') + 1)) IS NULL
    ORDER BY 1
  LOOP
    v_suffix := to_char(v_from, '"y"YYYY"m"MM');
    v_to := v_from + interval '1 month';
    CONTINUE WHEN to_regclass('cyclone_runs_' || v_suffix) IS NOT NULL
              AND (to_regclass('cyclone_attempts_' || v_suffix) IS NOT NULL OR to_regclass('cyclone_attempts') IS NULL);
    BEGIN
      PERFORM set_config('lock_timeout', '100ms', true);
      IF to_regclass('cyclone_runs_' || v_suffix) IS NULL THEN
        -- Room on each page for the updates a run and its steps get (claim,
        -- heartbeat, complete, settle).
        EXECUTE format('CREATE TABLE %I PARTITION OF cyclone_runs FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 80)',
                       'cyclone_runs_' || v_suffix, cyclone_month_floor(v_from), cyclone_month_floor(v_to));
        EXECUTE format('CREATE TABLE %I PARTITION OF cyclone_steps FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 80)',
                       'cyclone_steps_' || v_suffix, cyclone_month_floor(v_from), cyclone_month_floor(v_to));
        PERFORM cyclone_set_queue_vacuum(('cyclone_steps_' || v_suffix)::regclass, true);
        v_created := v_created + 1;
      END IF;
      -- Attempts are only inserted: no room kept for updates. (The migrations
      -- before version 11, which made the table, run this file too.)
      IF to_regclass('cyclone_attempts') IS NOT NULL THEN
        EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF cyclone_attempts FOR VALUES FROM (%L) TO (%L)',
                       'cyclone_attempts_' || v_suffix, cyclone_month_floor(v_from), cyclone_month_floor(v_to));
      END IF;
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

-- The months of the run-scoped tables, oldest first: the runs partition's
-- name, the month it starts, and for months that ended before p_older_than
-- whether a run in it is unfinished or not yet past its retention (looked up
-- only for those: it reads the partition).
CREATE OR REPLACE FUNCTION cyclone_partitions(p_older_than timestamptz)
RETURNS TABLE (name text, month timestamptz, ended_before boolean, live_runs boolean)
LANGUAGE plpgsql AS $$
DECLARE
  v_name  text;
  v_month timestamp;
  v_old   boolean;
  v_live  boolean;
BEGIN
  FOR v_name IN
    SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'cyclone_runs'::regclass ORDER BY c.relname
  LOOP
    v_month := to_date(substr(v_name, length('cyclone_runs_') + 1), '"y"YYYY"m"MM')::timestamp;
    v_old := (v_month + interval '1 month') AT TIME ZONE 'UTC' <= p_older_than;
    v_live := NULL;
    IF v_old THEN
      EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE delete_after IS NULL OR delete_after > now())', v_name)
        INTO v_live;
    END IF;
    name := v_name; month := v_month AT TIME ZONE 'UTC'; ended_before := v_old; live_runs := v_live;
    RETURN NEXT;
  END LOOP;
END $$;

-- Drops whole months that ended before p_older_than and whose every run is
-- finished and past its retention: the runs partition, its steps' and their
-- attempts'. A month
-- that still holds such a run is kept (cyclone_partitions reports it). The
-- month before this one is never dropped: cyclone_ensure_partitions keeps it
-- for clients whose clock is behind. Returns the names of the dropped
-- partitions.
--
-- Dropping a partition takes an exclusive lock on its parent table for a
-- moment, and every statement on the table queues behind the request. It
-- waits at most 100 ms, below the server's deadlock_timeout, so that when it
-- and a transaction wait on each other it is always this drop that gives up
-- (the month is left for the next call), never the application's statement.
CREATE OR REPLACE FUNCTION cyclone_drop_partitions(p_older_than timestamptz) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
  v_month   record;
  v_tables  text[];
  v_timeout text := current_setting('lock_timeout');
BEGIN
  PERFORM pg_advisory_xact_lock(7482001772);
  FOR v_month IN
    SELECT * FROM cyclone_partitions(p_older_than)
     WHERE ended_before AND NOT live_runs
       AND month < (date_trunc('month', now() AT TIME ZONE 'UTC') - interval '1 month') AT TIME ZONE 'UTC'
  LOOP
    v_tables := ARRAY(SELECT t FROM unnest(ARRAY['cyclone_attempts_', 'cyclone_steps_']) AS p,
                                    concat(p, substr(v_month.name, length('cyclone_runs_') + 1)) AS t
                       WHERE to_regclass(t) IS NOT NULL) || v_month.name;
    BEGIN
      PERFORM set_config('lock_timeout', '100ms', true);
      EXECUTE 'DROP TABLE ' || (SELECT string_agg(quote_ident(t), ', ') FROM unnest(v_tables) AS t);
      PERFORM set_config('lock_timeout', v_timeout, true);
      RETURN QUERY SELECT unnest(v_tables);
    EXCEPTION WHEN lock_not_available THEN
      RAISE NOTICE 'cyclone_drop_partitions: % is busy; it is left for the next call', v_month.name;
    END;
  END LOOP;
END $$;
