-- Cyclone's schema, version 4: indexes for the dashboard's reads, so that
-- every list it shows stays an index scan of one page, however long the
-- history grows.
--
-- Each index costs writes. A run gets an entry in cyclone_runs_queue and
-- cyclone_runs_name when it is enqueued and again when it finishes: an
-- update of a run's state is never a HOT update, so every index takes the
-- new row version. cyclone_runs_state takes runs only while they are not
-- completed. A step gets an entry in cyclone_steps_finished when it
-- completes or is discarded. The other partial indexes hold only the rows
-- the dashboard looks for (runs with a unique key, discarded and paused
-- steps) and cost nothing for the rest.

-- The runs list is paged by run id, newest first (ids are UUIDv7, so id order
-- is creation order and a time range is an id range); each filter has an
-- index that yields its runs in that order.
CREATE INDEX cyclone_runs_state ON cyclone_runs (state, id) WHERE state <> 'completed';
CREATE INDEX cyclone_runs_queue ON cyclone_runs (queue, id);
-- A run's name: the step kind of a standalone job, the workflow's name otherwise.
CREATE INDEX cyclone_runs_name ON cyclone_runs ((COALESCE(kind, workflow)), id);
-- Search by unique key finds finished runs too, which cyclone_unique_keys
-- (the keys of unfinished runs only, the arbiter of enqueue's ON CONFLICT) does not hold.
CREATE INDEX cyclone_runs_unique_key_any ON cyclone_runs (unique_key, id) WHERE unique_key IS NOT NULL;

-- Throughput: the latest finished steps of a queue, newest first; a queue's
-- rate is read from a bounded sample of them, not a count of the window.
CREATE INDEX cyclone_steps_finished ON cyclone_steps (queue, finished_at) WHERE state IN ('completed', 'discarded');
-- Failed and paused steps per queue: few rows, counted without a scan.
CREATE INDEX cyclone_steps_held ON cyclone_steps (queue, state) WHERE state IN ('discarded', 'paused');

INSERT INTO cyclone_schema_migrations (version, name) VALUES (4, 'CycloneDashboardIndexes1765008000000')
  ON CONFLICT DO NOTHING;
