-- Which months the hot statements read. Their plans are kept per connection
-- (see complete-steps.sql), and a kept plan over the partitioned tables opens
-- and locks every month's partitions and indexes each time it runs, unless a
-- bound on the run id lets the executor leave months out as it starts
-- ("Subplans Removed"); `run_id = ANY ($1)` does not. With twelve months, a
-- claim of one step took 0.86 ms a call, 0.65 ms with a bound that left nine
-- out.
--
-- Every bound is from below, on purpose: given a lower and an upper bound,
-- the planner takes the range for a few rows and prefers it to the right
-- index. On a young table the completion's kept plan read the range once and
-- compared every pair (a batch of 300: 45,000 times) instead of looking each
-- step up by its key, and the limited claim counted its running steps and
-- picked each key's steps from every step of the range (51 ms a call).
-- One bound leaves the planner its indexes, and still leaves out the months
-- of history; the months ahead stay, empty.
--
-- A statement keyed by run ids leaves out the months before its oldest id
-- (cyclone_lowest_id). The claim's scans are keyed by queue, not by run: they
-- read from cyclone_claim_floor's month on, which holds the oldest running or
-- paused run, so every step that can be claimed or is running (such a step's
-- run is unfinished). The floor is never later than the month before this
-- one, so new runs fall above it.
--
-- The floor is recomputed by every client's recovery sweep
-- (cyclone_refresh_claim_floor). A run comes back from failed only through a
-- retry, which lowers the floor in its own transaction
-- (cyclone_lower_claim_floor); anything else that places an unfinished run
-- below it (an id from a clock a month off, a row written by hand) is
-- claimed from the next sweep on.

-- The lowest of some run ids (PostgreSQL has no min() for uuid); NULL for none.
CREATE OR REPLACE FUNCTION cyclone_lowest_id(p_ids uuid[]) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$
  SELECT u FROM unnest(p_ids) AS u ORDER BY u LIMIT 1;
$$;

-- The first month that holds a running or paused run, as of this statement,
-- and never later than the month before this one. Only runs of the months
-- before that one can move it, so only they are read: while the vacuum is
-- held back, the index holds an entry for every run of this month that has
-- run since, dead, and a read from its start visited them all (95 ms after
-- 150,000 jobs).
CREATE OR REPLACE FUNCTION cyclone_live_floor() RETURNS uuid
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_latest timestamp := date_trunc('month', now() AT TIME ZONE 'UTC') - interval '1 month';
  v_before uuid := cyclone_month_floor(v_latest);
BEGIN
  RETURN cyclone_month_floor(least(v_latest,
    cyclone_run_month((SELECT id FROM cyclone_runs WHERE state = 'running' AND id < v_before ORDER BY id LIMIT 1)),
    cyclone_run_month((SELECT id FROM cyclone_runs WHERE state = 'paused' AND id < v_before ORDER BY id LIMIT 1))));
END $$;

-- Sets the floor to the live one. Writes only when it changed, then under the
-- row's lock and with the runs read again after it: a retry that brings a run
-- back has either committed by then (and is read) or waits for the lock and
-- lowers the floor written here.
CREATE OR REPLACE FUNCTION cyclone_refresh_claim_floor() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM cyclone_claim_floor f WHERE f.low = cyclone_live_floor()) THEN
    RETURN;
  END IF;
  PERFORM 1 FROM cyclone_claim_floor FOR UPDATE;
  UPDATE cyclone_claim_floor SET low = cyclone_live_floor();
END $$;

-- Takes a run's month in, for a run that is unfinished again. Always a write,
-- so that it waits for a refresh holding the row and then lowers what that
-- refresh wrote.
CREATE OR REPLACE FUNCTION cyclone_lower_claim_floor(p_run_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE cyclone_claim_floor SET low = least(low, cyclone_month_floor(cyclone_run_month(p_run_id)));
END $$;
