-- Cyclone's schema, version 6: the plain claim takes priorities one at a
-- time on PostgreSQL before 18, so steps due later at a higher priority
-- (delayed, or retrying in backoff) no longer slow every claim of their
-- queue (see sql/functions/claim-steps.sql). Only a function changes.

\ir ../sql/functions/claim-steps.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (6, 'CycloneClaimPriorities1765267200000')
  ON CONFLICT DO NOTHING;
