-- Cyclone's schema, version 5: flow control and schedules. Concurrency and
-- rate limits across every replica, fair claiming between the keys of a
-- kind, and the durable state of cron schedules.

-- The tables the application writes all the time are locked first, runs
-- then steps (the order of every transition), so no statement below waits
-- for a lock while holding another that a worker needs. The migrator's
-- lock_timeout makes the migration give way to live workers and try again.
LOCK TABLE cyclone_runs, cyclone_steps IN ACCESS EXCLUSIVE MODE;

-- The key a limited step was enqueued with: the result of its kind's key
-- function for its input, or '' for a kind-wide limit; NULL for a step of a
-- kind without limits. rate_key is the rate limit's key when the kind has one.
ALTER TABLE cyclone_steps ADD COLUMN flow_key text, ADD COLUMN rate_key text;

-- The plain claim takes only steps without limits, so a backlog held back by
-- a limit never lies in its way.
DROP INDEX cyclone_steps_claim;
CREATE INDEX cyclone_steps_claim ON cyclone_steps (queue, priority DESC, scheduled_at, id)
  WHERE state = 'available' AND flow_key IS NULL;

-- The claim of limited steps: one probe finds a kind's next key with work
-- (round-robin), a second that key's next step.
CREATE INDEX cyclone_steps_flow ON cyclone_steps (queue, kind, flow_key, priority DESC, scheduled_at, id)
  WHERE state = 'available' AND flow_key IS NOT NULL;

-- Running limited steps of a kind and of a key, counted by each claim. Keyed
-- on lease_expiry, which exactly the running steps have, rather than on
-- state = 'running', which lookups of a step by id name too (see the
-- baseline's note on partial indexes).
CREATE INDEX cyclone_steps_flow_running ON cyclone_steps (kind, flow_key)
  WHERE lease_expiry IS NOT NULL AND flow_key IS NOT NULL;

-- Starts of rate-limited steps, counted per scope in buckets of a twentieth
-- of the window (sql/functions/flow-locks.sql).
CREATE TABLE cyclone_rate_buckets (
  scope      text NOT NULL,      -- 'rate:<kind>' or 'rate:<kind>:<key>'
  bucket     bigint NOT NULL,    -- epoch milliseconds / bucket width
  starts     integer NOT NULL,
  expires_at timestamptz NOT NULL,  -- from then on it can no longer overlap a window
  PRIMARY KEY (scope, bucket)
);
CREATE INDEX cyclone_rate_buckets_expires ON cyclone_rate_buckets (expires_at);

-- The durable state of each schedule: which tick it fired last. A tick is
-- fired by the transaction that moves last_tick_at up to it, together with
-- the run it enqueues, so replicas firing together, or a replica that dies
-- in the middle, start exactly one run a tick.
CREATE TABLE cyclone_schedules (
  name         text PRIMARY KEY,
  kind         text NOT NULL,
  cron         text NOT NULL,
  timezone     text NOT NULL,
  since        timestamptz NOT NULL DEFAULT now(),  -- ticks before this are not owed to anyone
  last_tick_at timestamptz,
  last_run_id  uuid,
  next_tick_at timestamptz,
  updated_at   timestamptz NOT NULL DEFAULT now()
);

\ir ../sql/functions/flow-locks.sql
\ir ../sql/functions/claim-steps.sql
\ir ../sql/functions/claim-flow.sql
\ir ../sql/functions/start-workflow.sql
\ir ../sql/functions/unique-conflict.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (5, 'CycloneFlowControl1765180800000')
  ON CONFLICT DO NOTHING;
