-- Cyclone's schema, version 9: the routing of a workflow's completed steps
-- (cyclone_release_successors) and the settling of its runs
-- (cyclone_settle_runs) leave out the months of history, as the claim and
-- the completion do since version 8 (see sql/functions/live-months.sql).

\ir ../sql/functions/release-successors.sql
\ir ../sql/functions/settle-runs.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (9, 'CycloneRoutingMonths1765526400000')
  ON CONFLICT DO NOTHING;
