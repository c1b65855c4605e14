DROP TABLE IF EXISTS cyclone_queues;

DELETE FROM cyclone_schema_migrations WHERE version = 11;
