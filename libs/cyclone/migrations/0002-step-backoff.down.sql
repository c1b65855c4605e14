-- Removes what 0002-step-backoff.sql added: the stored backoff, and the
-- functions it changed, back to their version 1 bodies.
ALTER TABLE cyclone_steps DROP COLUMN IF EXISTS backoff_ms;

\ir ../sql/previous/fail-step.v1.sql
\ir ../sql/previous/start-workflow.v1.sql

DELETE FROM cyclone_schema_migrations WHERE version = 2;
