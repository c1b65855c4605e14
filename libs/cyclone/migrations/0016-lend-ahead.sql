-- Cyclone's schema, version 16: a claim that leaves room unfilled asks the
-- clients holding steps of the queue claimed ahead to hand them back, with a
-- NOTIFY on cyclone_idle (claim-steps.sql). The function keeps its
-- arguments: clients of the previous version claim as before.

\ir ../sql/functions/claim-steps.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (16, 'CycloneLendAhead1766304000000')
  ON CONFLICT DO NOTHING;
