-- Cyclone's schema, version 4: indexes for the dashboard's reads, so that
-- every list it shows stays an index scan of one page, however long the
-- history grows.
--
-- Each index costs a write: the ones on runs one entry per run inserted and
-- one when it finishes (cyclone_runs_state only for runs that are not
-- completed); on steps one entry per step that completes or is discarded.
-- The partial ones hold only rows a dashboard looks for and cost nothing to
-- every other row.

-- The runs list is paged by run id, newest first (ids are UUIDv7, so id order
-- is creation order and a time range is an id range); each filter has an
-- index that yields its runs in that order.
CREATE INDEX cyclone_runs_state ON cyclone_runs (state, id) WHERE state <> 'completed';
CREATE INDEX cyclone_runs_queue ON cyclone_runs (queue, id);
-- A run's name: the step kind of a standalone job, the workflow's name otherwise.
CREATE INDEX cyclone_runs_name ON cyclone_runs ((COALESCE(kind, workflow)), id);
-- Search by unique key finds finished runs too, which cyclone_runs_unique_key
-- (unfinished runs only, the arbiter of enqueue's ON CONFLICT) does not hold.
CREATE INDEX cyclone_runs_unique_key_any ON cyclone_runs (unique_key, id) WHERE unique_key IS NOT NULL;

-- Throughput: the latest finished steps of a queue, newest first; a queue's
-- rate is read from a bounded sample of them, not a count of the window.
CREATE INDEX cyclone_steps_finished ON cyclone_steps (queue, finished_at) WHERE state IN ('completed', 'discarded');
-- Failed and paused steps per queue: few rows, counted without a scan.
CREATE INDEX cyclone_steps_held ON cyclone_steps (queue, state) WHERE state IN ('discarded', 'paused');

INSERT INTO cyclone_schema_migrations (version, name) VALUES (4, 'CycloneDashboardIndexes1765008000000')
  ON CONFLICT DO NOTHING;
