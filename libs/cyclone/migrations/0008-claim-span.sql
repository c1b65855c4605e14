-- Cyclone's schema, version 8: the claim, and the start and completion of
-- steps, read only the months that can hold their steps, rather than every
-- month's partitions (see sql/functions/live-months.sql). The claim's span
-- starts as every month; each client's recovery sweep narrows it to the
-- months of unfinished runs.

CREATE TABLE cyclone_claim_span (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  low      uuid NOT NULL,
  high     uuid NOT NULL
);
INSERT INTO cyclone_claim_span (low, high)
  VALUES ('00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff');

\ir ../sql/functions/partitions.sql
\ir ../sql/functions/live-months.sql
\ir ../sql/functions/claim-flow.sql
\ir ../sql/functions/claim-steps.sql
\ir ../sql/functions/complete-steps.sql
\ir ../sql/functions/retry-steps.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (8, 'CycloneClaimSpan1765440000000')
  ON CONFLICT DO NOTHING;
