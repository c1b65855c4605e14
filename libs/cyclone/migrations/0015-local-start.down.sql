-- Restores the schema as it was before version 15.

DROP FUNCTION cyclone_insert_and_start(uuid[], text[], jsonb[], text[], bigint[], smallint[], integer[], integer[], bigint[],
                                       timestamptz[], bigint[], jsonb[], text[], text[], text[], text, text[], integer,
                                       text, bigint);

DELETE FROM cyclone_schema_migrations WHERE version = 15;
