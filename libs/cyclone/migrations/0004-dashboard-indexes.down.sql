-- Removes the dashboard's indexes (0004-dashboard-indexes.sql).
DROP INDEX IF EXISTS cyclone_steps_held;
DROP INDEX IF EXISTS cyclone_steps_finished;
DROP INDEX IF EXISTS cyclone_runs_unique_key_any;
DROP INDEX IF EXISTS cyclone_runs_name;
DROP INDEX IF EXISTS cyclone_runs_queue;
DROP INDEX IF EXISTS cyclone_runs_state;
DELETE FROM cyclone_schema_migrations WHERE version = 4;
