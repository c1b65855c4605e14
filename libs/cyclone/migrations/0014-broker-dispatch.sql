-- Cyclone's schema, version 14: broker dispatch (SPEC §17, seed 004). With
-- dispatch on, PostgreSQL stays the record of every run and step, and a
-- transactional outbox carries "this step is ready" to Redis Streams, which
-- carry it to the workers.

-- Runs, steps, then attempts are locked first, in the order of every
-- transition; the migrator's lock_timeout makes the migration give way to
-- live workers and try again.
LOCK TABLE cyclone_runs, cyclone_steps, cyclone_attempts IN ACCESS EXCLUSIVE MODE;

-- Whether dispatch is on for this database, and what its clients agreed on:
-- one row. A client with dispatch on keeps active_until in the future while
-- it runs (its publisher's passes); once the last such client has been gone
-- past it, steps stop getting outbox rows, and the next client to turn
-- dispatch on re-dispatches every available step (outbox-publisher.ts).
-- epoch: the value Cyclone last wrote under its epoch key in Redis; a Redis
-- that no longer has it lost its data, and every available step is
-- re-dispatched at once.
CREATE TABLE cyclone_dispatch (
  only_row     boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  shards       integer NOT NULL CHECK (shards > 0),
  epoch        text,
  active_until timestamptz NOT NULL
);

-- One row per step to dispatch: written in the transaction that makes the
-- step available (the triggers below), taken by the publisher in batches,
-- added to its queue's stream and deleted. due_at is when the step may start
-- (a delayed step's row waits here, not in Redis); attempts and
-- next_attempt_at count and space the publications that failed because Redis
-- was down.
CREATE TABLE cyclone_outbox (
  id              bigserial PRIMARY KEY,
  step_id         bigint NOT NULL,
  run_id          uuid NOT NULL,
  queue           text NOT NULL,
  kind            text,
  node_type       text NOT NULL,
  priority        smallint NOT NULL,
  due_at          timestamptz NOT NULL,
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now()
);
-- The publisher's order: due first, then priority, then age.
CREATE INDEX cyclone_outbox_due ON cyclone_outbox (due_at, priority DESC, id);
-- "Has this step a dispatch pending?": the lost-dispatch sweep's question.
CREATE INDEX cyclone_outbox_step ON cyclone_outbox (step_id);

ALTER TABLE cyclone_steps DROP CONSTRAINT cyclone_steps_error_kind_check;
ALTER TABLE cyclone_steps ADD CONSTRAINT cyclone_steps_error_kind_check
  CHECK (error_kind IN ('error', 'timeout', 'permanent', 'reclaim_limit', 'signal_timeout', 'max_deliveries'));

\ir ../sql/functions/dispatch-step.sql
\ir ../sql/functions/start-dispatched.sql
\ir ../sql/functions/redispatch.sql
\ir ../sql/functions/fail-delivery.sql

-- Every write that makes a step available, whichever function or statement
-- makes it (an enqueue, a workflow's start or successors, a retry, snooze,
-- timer, signal, resume, hand-back, reclaim, ...), passes here in its own
-- transaction. The WHEN clauses are evaluated without calling the function,
-- so a write that does not make a step available (a claim, a completion)
-- costs nothing, and with dispatch off one that does costs one lookup.
CREATE TRIGGER cyclone_steps_dispatch_insert AFTER INSERT ON cyclone_steps
  FOR EACH ROW WHEN (NEW.state = 'available') EXECUTE FUNCTION cyclone_dispatch_step();
CREATE TRIGGER cyclone_steps_dispatch_update AFTER UPDATE OF state, scheduled_at ON cyclone_steps
  FOR EACH ROW WHEN (NEW.state = 'available' AND (OLD.state <> 'available' OR OLD.scheduled_at <> NEW.scheduled_at))
  EXECUTE FUNCTION cyclone_dispatch_step();

INSERT INTO cyclone_schema_migrations (version, name) VALUES (14, 'CycloneBrokerDispatch1766131200000')
  ON CONFLICT DO NOTHING;
