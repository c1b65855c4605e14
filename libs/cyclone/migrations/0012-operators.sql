-- Cyclone's schema, version 12: what an operator sees and steers.
--
-- cyclone_attempts keeps every attempt of a step that ended other than by
-- completing (record-attempt.sql); the completing one is the step's own row,
-- so a completion writes nothing more. It is partitioned by month like the
-- steps, so a month's attempts are dropped with its runs, and retention
-- deletes a run's with the run.
--
-- cyclone_clients holds the clients running now: each upserts its row when
-- it starts, refreshes it on a loop with one statement, which also ages out
-- the rows of clients that stopped refreshing, and deletes it at shutdown.
-- Its info is for what later features say of a client (versions, names).
--
-- cyclone_step_kinds holds the step kinds clients registered, with their
-- defaults as the registering client resolved them, for cyclone_enqueue
-- (enqueue.sql), which enqueues from SQL through the same insert as the
-- client (insert-jobs.sql).
--
-- Nothing here locks the runs or steps: new tables, and functions replaced.

CREATE TABLE cyclone_attempts (
  run_id      uuid NOT NULL,
  step_id     bigint NOT NULL,
  seq         integer NOT NULL,
  attempt     integer NOT NULL,
  started_at  timestamptz NOT NULL,
  finished_at timestamptz NOT NULL,
  outcome     text NOT NULL CHECK (outcome IN ('retried', 'discarded', 'timed_out', 'cancelled', 'reclaimed', 'snoozed')),
  error       text,
  error_kind  text,
  stack       text,
  -- The client that held the attempt's lease.
  worker      text,
  PRIMARY KEY (run_id, step_id, seq)
) PARTITION BY RANGE (run_id);

CREATE TABLE cyclone_clients (
  -- The client's id: the lease owner of the steps it claims.
  id           text PRIMARY KEY,
  host         text NOT NULL,
  pid          integer NOT NULL,
  -- Worker slots per queue it serves ({"default": 10}); empty for an enqueue-only client.
  queues       jsonb NOT NULL DEFAULT '{}',
  info         jsonb NOT NULL DEFAULT '{}',
  started_at   timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE cyclone_step_kinds (
  kind              text PRIMARY KEY,
  queue             text NOT NULL,
  priority          smallint NOT NULL,
  max_attempts      integer NOT NULL,
  timeout_ms        bigint,
  retention_ms      bigint NOT NULL,
  max_reclaims      integer,
  -- Its backoff after each attempt but the last, NULL for the default backoff.
  backoff_ms        bigint[],
  -- '' when it has limits with no key (they apply to every step of the kind), NULL without limits.
  flow_key          text,
  -- The option (concurrency.key, rateLimit.key) whose function keys its limits; cyclone_enqueue refuses such a kind.
  limit_key_option  text,
  max_payload_bytes integer NOT NULL,
  -- The client that recorded these defaults last (each client records its kinds at startup).
  registered_by     text NOT NULL,
  registered_at     timestamptz NOT NULL DEFAULT now()
);

\ir ../sql/functions/record-attempt.sql
-- Version 10's, without the stack (a database migrated from scratch never had it).
DROP FUNCTION IF EXISTS cyclone_fail_step(uuid, bigint, text, bigint, text, text, bigint);
\ir ../sql/functions/fail-step.sql
\ir ../sql/functions/recover-step.sql
\ir ../sql/functions/cancel-run.sql
\ir ../sql/functions/snooze-step.sql
\ir ../sql/functions/partitions.sql
\ir ../sql/functions/insert-jobs.sql
\ir ../sql/functions/enqueue.sql

-- Every month of runs gets its attempts' partition.
SELECT cyclone_ensure_partitions(3);

INSERT INTO cyclone_schema_migrations (version, name) VALUES (12, 'CycloneOperators1765785600000')
  ON CONFLICT DO NOTHING;
