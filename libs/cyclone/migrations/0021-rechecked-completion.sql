-- Cyclone's schema, version 21: the completion finds what PostgreSQL 18
-- dropped. There, a join pruned for each of its outer rows loses the rows
-- after one that was changed while the statement waited for it: a
-- completion could leave steps of its batch running (their results taken
-- for lost leases) and its runs unlocked (complete-steps.sql). It locks the
-- runs it missed by id, and tries steps a pass left once more. A completion
-- that deleted every step of its batch (jobs kept for no time) no longer
-- looks them up again. A child's result reaches its code workflow, and
-- wakes it, without partition pruning, which such a join lost rows under.

\ir ../sql/functions/complete-steps.sql
\ir ../sql/functions/deliver-results.sql
\ir ../sql/functions/wake-workflows.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (21, 'CycloneRecheckedCompletion1766736000000')
  ON CONFLICT DO NOTHING;
