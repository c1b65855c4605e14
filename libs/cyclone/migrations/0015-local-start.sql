-- Cyclone's schema, version 15: an enqueue that starts its jobs in the
-- enqueuing client's idle workers, in the same statement and commit
-- (cyclone_insert_and_start). Functions only.

\ir ../sql/functions/insert-and-start.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (15, 'CycloneLocalStart1766217600000')
  ON CONFLICT DO NOTHING;
