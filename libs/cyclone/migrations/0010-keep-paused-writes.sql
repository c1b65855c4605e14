-- Cyclone's schema, version 10: the rule that keeps a paused run's steps
-- from becoming available moves from a row trigger on cyclone_steps into
-- the four writes that can make a running step available (retry, snooze,
-- hand-back, reclaim; see sql/functions/keep-paused.sql). A BEFORE UPDATE
-- row trigger makes every update of a step lock the row first, one more WAL
-- record a row on each completion.
--
-- Dropping a trigger locks its table: runs then steps are locked first, in
-- the order of every transition, and the migrator's lock_timeout makes the
-- migration give way to live workers and try again.
LOCK TABLE cyclone_runs, cyclone_steps IN ACCESS EXCLUSIVE MODE;

DROP TRIGGER IF EXISTS cyclone_steps_keep_paused ON cyclone_steps;
DROP FUNCTION IF EXISTS cyclone_keep_paused();

\ir ../sql/functions/keep-paused.sql
\ir ../sql/functions/fail-step.sql
\ir ../sql/functions/snooze-step.sql
\ir ../sql/functions/hand-back.sql
\ir ../sql/functions/recover-step.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (10, 'CycloneKeepPausedWrites1765612800000')
  ON CONFLICT DO NOTHING;
