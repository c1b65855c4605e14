-- Cyclone's schema, version 2: each step keeps its own backoff. The delay
-- after a failed attempt comes from the step kind's backoff function, which
-- only a client that registers the kind can run; a replica that does not
-- (an enqueue-only API, a worker of other queues) still sweeps, and consumes
-- timed-out attempts. So the client that writes a step (enqueue, start),
-- which runs its kind, stores the delays for every attempt, and the failure
-- applies the stored one.
--
-- Safe against workers of version 1 running meanwhile: adding a column
-- without a default changes no row, the functions keep their signatures,
-- and rows written by version 1 (backoff_ms NULL) use the delay the caller
-- passes, as before.

-- The delay in ms after each failed attempt (element n after attempt n),
-- from the step's own backoff; NULL when the step uses the default backoff.
ALTER TABLE cyclone_steps ADD COLUMN backoff_ms bigint[];

\ir ../sql/functions/fail-step.sql
\ir ../sql/functions/start-workflow.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (2, 'CycloneStepBackoff1764835200000')
  ON CONFLICT DO NOTHING;
