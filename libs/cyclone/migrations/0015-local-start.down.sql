-- Restores the schema as it was before version 15.

LOCK TABLE cyclone_runs, cyclone_steps IN ACCESS EXCLUSIVE MODE;

DROP INDEX cyclone_outbox_deferred;
DROP TRIGGER cyclone_steps_timer_insert ON cyclone_steps;
DROP TRIGGER cyclone_steps_timer_update ON cyclone_steps;
DROP FUNCTION cyclone_timer_set();
DROP FUNCTION cyclone_insert_and_start(uuid[], text[], jsonb[], text[], bigint[], smallint[], integer[], integer[], bigint[],
                                       timestamptz[], bigint[], jsonb[], text[], text[], text[], text, text[], integer,
                                       text, bigint);

DELETE FROM cyclone_schema_migrations WHERE version = 15;
