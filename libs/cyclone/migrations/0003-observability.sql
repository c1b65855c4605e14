-- Cyclone's schema, version 3: what observability needs stored.
--
-- A running step's progress, reported by its handler with ctx.progress():
-- written at most once a heartbeat interval, fenced on the lease like every
-- worker write, cleared when an attempt is claimed.
ALTER TABLE cyclone_steps ADD COLUMN progress jsonb;

-- The trace context (W3C trace context fields, as the app's propagator
-- writes them) of the span that enqueued or started the run, so the span of
-- each of its steps continues that trace in whichever process runs it.
-- Written by the insert of the run itself; NULL when tracing is off.
ALTER TABLE cyclone_runs ADD COLUMN trace_context jsonb;

-- cyclone_start_workflow takes the trace context; the old signature goes.
DROP FUNCTION IF EXISTS cyclone_start_workflow(uuid, text, jsonb, jsonb, text, text, bigint, jsonb);
\ir ../sql/functions/start-workflow.sql

-- The claim clears progress and returns the trace context and the wait: new columns of its result.
DROP FUNCTION IF EXISTS cyclone_claim_steps(text, text[], integer, text, bigint);
\ir ../sql/functions/claim-steps.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (3, 'CycloneObservability1764921600000')
  ON CONFLICT DO NOTHING;
