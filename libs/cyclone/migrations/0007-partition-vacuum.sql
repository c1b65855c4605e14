-- Cyclone's schema, version 7: a month of steps is vacuumed after a fixed
-- number of dead rows, indexes included, whatever its size, so that the dead
-- entries claims leave at the head of the claim index do not pile up in a
-- month that holds much history (see cyclone_set_queue_vacuum in
-- sql/functions/partitions.sql). Changing these settings takes a lock that
-- reads and writes do not wait for.

\ir ../sql/functions/partitions.sql

SELECT cyclone_set_queue_vacuum(i.inhrelid::regclass) FROM pg_inherits i WHERE i.inhparent = 'cyclone_steps'::regclass;

INSERT INTO cyclone_schema_migrations (version, name) VALUES (7, 'CyclonePartitionVacuum1765353600000')
  ON CONFLICT DO NOTHING;
