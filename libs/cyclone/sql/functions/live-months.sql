-- Which months the hot statements read. Their plans are kept per connection
-- (see complete-steps.sql), and a kept plan over the partitioned tables opens
-- and locks every month's partitions and indexes each time it runs, unless a
-- bound on the run id lets the executor leave months out as it starts
-- ("Subplans Removed"); `run_id = ANY ($1)` does not. With twelve months, a
-- claim of one step took 0.86 ms, 0.65 ms reading three.
--
-- A statement keyed by run ids leaves out the months before its oldest id
-- (cyclone_lowest_id): history lies there. Only from below: with both bounds,
-- the planner takes the range for a few rows, and on a young table its kept
-- plan read the range once and compared every pair (a batch of 300, 45,000
-- times) instead of looking each step up by its key.
--
-- The claim's scans are keyed by queue, not by run: they read the months
-- between cyclone_claim_span's low (inclusive) and high (exclusive), which
-- hold every running or paused run, and so every step that can be claimed or
-- is running: such a step's run is unfinished. The span is never narrower
-- than the month before this one to the month after it, so new runs fall
-- inside it.
--
-- The span is recomputed by every client's recovery sweep
-- (cyclone_refresh_claim_span). A run comes back from failed only through a
-- retry, which widens the span in its own transaction
-- (cyclone_widen_claim_span); anything else that places an unfinished run
-- outside it (an id from a clock a month off, a row written by hand) is
-- claimed from the next sweep on.

-- The lowest of some run ids (PostgreSQL has no min() for uuid); NULL for none.
CREATE OR REPLACE FUNCTION cyclone_lowest_id(p_ids uuid[]) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$
  SELECT u FROM unnest(p_ids) AS u ORDER BY u LIMIT 1;
$$;

-- The months that hold every running or paused run, as of this statement.
CREATE OR REPLACE FUNCTION cyclone_live_span(OUT low uuid, OUT high uuid)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  SELECT cyclone_month_floor(least(this - interval '1 month', cyclone_run_month(oldest_running), cyclone_run_month(oldest_paused))),
         cyclone_month_floor(greatest(this + interval '1 month', cyclone_run_month(newest_running), cyclone_run_month(newest_paused))
                             + interval '1 month')
    FROM (SELECT date_trunc('month', now() AT TIME ZONE 'UTC') AS this,
                 (SELECT id FROM cyclone_runs WHERE state = 'running' ORDER BY id LIMIT 1) AS oldest_running,
                 (SELECT id FROM cyclone_runs WHERE state = 'paused' ORDER BY id LIMIT 1) AS oldest_paused,
                 (SELECT id FROM cyclone_runs WHERE state = 'running' ORDER BY id DESC LIMIT 1) AS newest_running,
                 (SELECT id FROM cyclone_runs WHERE state = 'paused' ORDER BY id DESC LIMIT 1) AS newest_paused) live
    INTO low, high;
END $$;

-- Sets the span to the live one. Writes only when it changed, then under the
-- row's lock and with the runs read again after it: a retry that brings a run
-- back has either committed by then (and is read) or waits for the lock and
-- widens the span written here.
CREATE OR REPLACE FUNCTION cyclone_refresh_claim_span() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_low  uuid;
  v_high uuid;
BEGIN
  SELECT s.low, s.high INTO v_low, v_high FROM cyclone_live_span() s;
  IF EXISTS (SELECT 1 FROM cyclone_claim_span c WHERE c.low = v_low AND c.high = v_high) THEN
    RETURN;
  END IF;
  PERFORM 1 FROM cyclone_claim_span FOR UPDATE;
  UPDATE cyclone_claim_span c SET low = s.low, high = s.high FROM cyclone_live_span() s;
END $$;

-- Takes a run's month into the span, for a run that is unfinished again.
-- Always a write, so that it waits for a refresh holding the row and then
-- widens what that refresh wrote.
CREATE OR REPLACE FUNCTION cyclone_widen_claim_span(p_run_id uuid) RETURNS void
LANGUAGE sql AS $$
  UPDATE cyclone_claim_span
     SET low  = least(low, cyclone_month_floor(cyclone_run_month(p_run_id))),
         high = greatest(high, cyclone_month_floor(cyclone_run_month(p_run_id) + interval '1 month'));
$$;
