-- Cyclone's schema, version 12: what an operator sees and steers.
--
-- cyclone_attempts keeps every attempt of a step that ended other than by
-- completing (record-attempt.sql); the completing one is the step's own row,
-- so a completion writes nothing more. It is partitioned by month like the
-- steps, so a month's attempts are dropped with its runs, and retention
-- deletes a run's with the run.
--
-- Nothing here locks the runs or steps: new tables, and functions replaced.

CREATE TABLE cyclone_attempts (
  run_id      uuid NOT NULL,
  step_id     bigint NOT NULL,
  seq         integer NOT NULL,
  attempt     integer NOT NULL,
  started_at  timestamptz NOT NULL,
  finished_at timestamptz NOT NULL,
  outcome     text NOT NULL CHECK (outcome IN ('retried', 'discarded', 'timed_out', 'cancelled', 'reclaimed', 'snoozed')),
  error       text,
  error_kind  text,
  stack       text,
  -- The client that held the attempt's lease.
  worker      text,
  PRIMARY KEY (run_id, step_id, seq)
) PARTITION BY RANGE (run_id);

\ir ../sql/functions/record-attempt.sql
-- Version 10's, without the stack (a database migrated from scratch never had it).
DROP FUNCTION IF EXISTS cyclone_fail_step(uuid, bigint, text, bigint, text, text, bigint);
\ir ../sql/functions/fail-step.sql
\ir ../sql/functions/recover-step.sql
\ir ../sql/functions/cancel-run.sql
\ir ../sql/functions/snooze-step.sql
\ir ../sql/functions/partitions.sql

-- Every month of runs gets its attempts' partition.
SELECT cyclone_ensure_partitions(3);

INSERT INTO cyclone_schema_migrations (version, name) VALUES (12, 'CycloneOperators1765785600000')
  ON CONFLICT DO NOTHING;
