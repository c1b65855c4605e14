-- Cyclone's schema, version 7: while a month is claimed from (this month,
-- the one before and those ahead), its steps are vacuumed after a fixed
-- number of dead rows, indexes included, whatever their size, so that the
-- dead entries claims leave at the head of the claim index do not pile up in
-- a month that holds much history; older months keep the server's settings
-- (see cyclone_queue_vacuum_options in sql/functions/partitions.sql).
-- Changing these settings takes a lock that reads and writes do not wait for.

\ir ../sql/functions/partitions.sql

-- Every month, then back to the server's settings for the ended ones.
SELECT cyclone_set_queue_vacuum(i.inhrelid::regclass, true) FROM pg_inherits i WHERE i.inhparent = 'cyclone_steps'::regclass;
SELECT cyclone_ensure_partitions(3);

INSERT INTO cyclone_schema_migrations (version, name) VALUES (7, 'CyclonePartitionVacuum1765353600000')
  ON CONFLICT DO NOTHING;
