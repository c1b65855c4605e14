-- Removes what 0005-flow-control.sql added, and restores the claim index and
-- cyclone_start_workflow as they were before it.
DROP FUNCTION IF EXISTS cyclone_unique_conflict(text, text, boolean, jsonb, text, text, bigint);
DROP FUNCTION IF EXISTS cyclone_claim_flow(text, text[], boolean, boolean, integer, text, bigint, integer, integer,
                                           integer, integer, bigint, boolean, text);
DROP FUNCTION IF EXISTS cyclone_start_steps(uuid[], bigint[], text, bigint);
DROP FUNCTION IF EXISTS cyclone_rate_record(text[], bigint);
DROP FUNCTION IF EXISTS cyclone_rate_used(text, bigint);
DROP FUNCTION IF EXISTS cyclone_lock_flow(text);
DROP TABLE IF EXISTS cyclone_schedules;
DROP TABLE IF EXISTS cyclone_rate_buckets;

DROP INDEX IF EXISTS cyclone_steps_flow_running;
DROP INDEX IF EXISTS cyclone_steps_flow;
DROP INDEX IF EXISTS cyclone_steps_claim;
ALTER TABLE cyclone_steps DROP COLUMN IF EXISTS flow_key, DROP COLUMN IF EXISTS rate_key;
CREATE INDEX cyclone_steps_claim ON cyclone_steps (queue, priority DESC, scheduled_at, id)
  WHERE state = 'available';

\ir ../sql/previous/start-workflow.v1.sql

DELETE FROM cyclone_schema_migrations WHERE version = 5;
