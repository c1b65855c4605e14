-- Cyclone's schema, version 15: an enqueue that starts its jobs in the
-- enqueuing client's idle workers, in the same statement and commit
-- (cyclone_insert_and_start); and, for broker dispatch, whose idle clients
-- do not poll, a NOTIFY when a timer is set and an index on the outbox rows
-- waiting out a backoff, so that the timer sweepers and the publishers can
-- sleep until their next row or timer is due; the outbox's trigger no
-- longer notifies inside the transactions of steps due now (dispatch-step.sql).

-- Steps are locked first, as every migration that alters them does; the
-- migrator's lock_timeout makes the migration give way to live workers and
-- try again.
LOCK TABLE cyclone_runs, cyclone_steps IN ACCESS EXCLUSIVE MODE;

\ir ../sql/functions/insert-and-start.sql
\ir ../sql/functions/timer-set.sql
\ir ../sql/functions/dispatch-step.sql

-- A write that sets no timer (an enqueue, a claim, a completion) fails the
-- WHEN clauses without calling the function.
CREATE TRIGGER cyclone_steps_timer_insert AFTER INSERT ON cyclone_steps
  FOR EACH ROW WHEN (NEW.wake_at IS NOT NULL) EXECUTE FUNCTION cyclone_timer_set();
CREATE TRIGGER cyclone_steps_timer_update AFTER UPDATE OF wake_at ON cyclone_steps
  FOR EACH ROW WHEN (NEW.wake_at IS NOT NULL AND NEW.wake_at IS DISTINCT FROM OLD.wake_at)
  EXECUTE FUNCTION cyclone_timer_set();

-- Rows whose publication failed (Redis down) and when each is tried again.
CREATE INDEX cyclone_outbox_deferred ON cyclone_outbox (next_attempt_at) WHERE next_attempt_at IS NOT NULL;

INSERT INTO cyclone_schema_migrations (version, name) VALUES (15, 'CycloneLocalStart1766217600000')
  ON CONFLICT DO NOTHING;
