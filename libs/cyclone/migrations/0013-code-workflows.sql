-- Cyclone's schema, version 13: workflows written as code (SPEC §18). A run
-- of one is a row of cyclone_runs with the version of the workflow that
-- started it, and a node for the workflow's method, claimed like any step;
-- each durable call of the method (wf.run, wf.step, wf.sleep,
-- wf.waitForSignal, wf.startChild, wf.result, wf.patched) is a node of the
-- run, named by its first argument, recorded once and replayed from there.

-- Runs, steps, then attempts are locked first, in the order of every
-- transition; the migrator's lock_timeout makes the migration give way to
-- live workers and try again.
LOCK TABLE cyclone_runs, cyclone_steps, cyclone_attempts IN ACCESS EXCLUSIVE MODE;

-- version: of the code workflow that started the run (NULL for jobs and DAG
-- runs); a client runs only runs of its version and older. parent_id: the
-- run whose wf.startChild started this one; it is cancelled with its parent
-- and completes its parent's wf.result.
ALTER TABLE cyclone_runs ADD COLUMN version integer, ADD COLUMN parent_id uuid;

-- input: a node's own input (a code workflow's wf.step and child nodes),
-- NULL where a node takes the run's. observed: the place of a finished node
-- in the order its workflow learned of results, which replays repeat
-- (sql/functions/load-history.sql). wake_delay_ms: on a waiting workflow's
-- node, how long after a wake-up its next pass starts (wake-workflows.sql).
ALTER TABLE cyclone_steps ADD COLUMN input jsonb, ADD COLUMN observed integer, ADD COLUMN wake_delay_ms integer;

ALTER TABLE cyclone_steps DROP CONSTRAINT cyclone_steps_node_type_check;
ALTER TABLE cyclone_steps ADD CONSTRAINT cyclone_steps_node_type_check
  CHECK (node_type IN ('step', 'signal', 'sleep', 'workflow', 'run', 'child', 'result', 'patch'));

-- The children of a run, for a cancel that takes them with it.
CREATE INDEX cyclone_runs_parent ON cyclone_runs (parent_id) WHERE parent_id IS NOT NULL;

-- Available workflow nodes in claim order, apart from the backlog of steps
-- (sql/functions/claim-workflows.sql).
CREATE INDEX cyclone_steps_workflows ON cyclone_steps (queue, priority DESC, scheduled_at, id)
  WHERE state = 'available' AND node_type = 'workflow';

-- A pass of a code workflow that ends waiting for its nodes is an attempt
-- of the workflow's node kept as suspended (record-nodes.sql).
ALTER TABLE cyclone_attempts DROP CONSTRAINT cyclone_attempts_outcome_check;
ALTER TABLE cyclone_attempts ADD CONSTRAINT cyclone_attempts_outcome_check
  CHECK (outcome IN ('retried', 'discarded', 'timed_out', 'cancelled', 'reclaimed', 'snoozed', 'suspended'));

\ir ../sql/functions/claim-flow.sql
\ir ../sql/functions/start-code-workflow.sql
\ir ../sql/functions/claim-workflows.sql
\ir ../sql/functions/load-history.sql
\ir ../sql/functions/wake-workflows.sql
\ir ../sql/functions/deliver-results.sql
\ir ../sql/functions/record-nodes.sql
\ir ../sql/functions/release-successors.sql
\ir ../sql/functions/settle-runs.sql
\ir ../sql/functions/complete-steps.sql
\ir ../sql/functions/fail-step.sql
\ir ../sql/functions/recover-step.sql
\ir ../sql/functions/cancel-run.sql
\ir ../sql/functions/retry-steps.sql
\ir ../sql/functions/signal.sql
\ir ../sql/functions/fire-timer.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (13, 'CycloneCodeWorkflows1766044800000')
  ON CONFLICT DO NOTHING;
