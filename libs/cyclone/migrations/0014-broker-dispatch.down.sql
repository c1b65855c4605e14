-- Restores the schema as it was before version 14: the outbox and the
-- dispatch settings go, and steps failed by max_deliveries read as failed by
-- an error, the nearest kind version 13 knows. Runs, steps, then attempts
-- are locked first, as the up does.

LOCK TABLE cyclone_runs, cyclone_steps, cyclone_attempts IN ACCESS EXCLUSIVE MODE;

DROP TRIGGER cyclone_steps_dispatch_insert ON cyclone_steps;
DROP TRIGGER cyclone_steps_dispatch_update ON cyclone_steps;
DROP FUNCTION cyclone_dispatch_step();
DROP FUNCTION cyclone_start_dispatched(uuid[], bigint[], text[], text, bigint, bigint);
DROP FUNCTION cyclone_redispatch(interval, text);
DROP FUNCTION cyclone_fail_delivery(uuid, bigint, text, text, bigint);
DROP TABLE cyclone_outbox;
DROP TABLE cyclone_dispatch;

UPDATE cyclone_steps SET error_kind = 'error' WHERE error_kind = 'max_deliveries';
UPDATE cyclone_attempts SET error_kind = 'error' WHERE error_kind = 'max_deliveries';
ALTER TABLE cyclone_steps DROP CONSTRAINT cyclone_steps_error_kind_check;
ALTER TABLE cyclone_steps ADD CONSTRAINT cyclone_steps_error_kind_check
  CHECK (error_kind IN ('error', 'timeout', 'permanent', 'reclaim_limit', 'signal_timeout'));

DELETE FROM cyclone_schema_migrations WHERE version = 14;
