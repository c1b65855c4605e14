-- Cyclone's schema, version 19: claims start each priority band at the
-- client's floor for it, so that while the vacuum is held back they do not
-- read every step claimed since (claim-bands.sql). New functions take the
-- floors (cyclone_claim_steps_from, cyclone_insert_and_start_from); the
-- ones clients of the previous version call keep their arguments and read
-- every band from its start, as before. The sweep's look for the oldest
-- unfinished run reads only the months that can move the claim floor, and
-- the completion reads the runs it locks and deletes by their keys.

\ir ../sql/functions/claim-bands.sql
\ir ../sql/functions/claim-steps.sql
\ir ../sql/functions/insert-and-start.sql
\ir ../sql/functions/live-months.sql
\ir ../sql/functions/complete-steps.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (19, 'CycloneClaimFloors1766563200000')
  ON CONFLICT DO NOTHING;
