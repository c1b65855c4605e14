-- Cyclone's schema, version 8: the claim, and the start and completion of
-- steps, leave out the months of history rather than read every month's
-- partitions (see sql/functions/live-months.sql). The claim's floor starts
-- below every month; each client's recovery sweep raises it to the month of
-- the oldest unfinished run.

CREATE TABLE cyclone_claim_floor (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  low      uuid NOT NULL
);
INSERT INTO cyclone_claim_floor (low) VALUES ('00000000-0000-0000-0000-000000000000');

\ir ../sql/functions/partitions.sql
\ir ../sql/functions/live-months.sql
\ir ../sql/functions/claim-flow.sql
\ir ../sql/functions/claim-steps.sql
\ir ../sql/functions/complete-steps.sql
\ir ../sql/functions/retry-steps.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (8, 'CycloneClaimFloor1765440000000')
  ON CONFLICT DO NOTHING;
