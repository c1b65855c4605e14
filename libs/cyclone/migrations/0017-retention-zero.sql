-- Cyclone's schema, version 17: retention 0 keeps no history. A completed
-- standalone job of retention 0 that nobody waits for is deleted with its
-- run in the statement that completes it (complete-steps.sql); how long
-- every other finished run is kept is cyclone_kept_for's (kept-for.sql):
-- a failed or cancelled run of retention 0 for the default retention, a
-- waited-for one for a minute. Functions only, with their arguments kept:
-- clients of the previous version run on it unchanged.

\ir ../sql/functions/kept-for.sql
\ir ../sql/functions/complete-steps.sql
\ir ../sql/functions/settle-runs.sql
\ir ../sql/functions/cancel-run.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (17, 'CycloneRetentionZero1766390400000')
  ON CONFLICT DO NOTHING;
