-- The outbox row of a step that has just become available, written in the
-- same transaction (the triggers of migration 0014 call this), while
-- dispatch is on for the database.
--
-- The publishers are woken by the wake-up every path already sends for a
-- step due now (cyclone_wake: by the client after an enqueue commits, or by
-- the transition's own NOTIFY), and listen for it. A NOTIFY here would be
-- sent inside every enqueue's transaction, and a transaction that sent one
-- holds the server's notification queue lock through its commit: concurrent
-- enqueues would commit one after another. Only a step due later (a delay, a
-- backoff, a snooze), for which no wake-up goes out, notifies here, so that
-- the publishers learn when its row falls due.
CREATE OR REPLACE FUNCTION cyclone_dispatch_step() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM cyclone_dispatch WHERE active_until > now()) THEN
    RETURN NULL;
  END IF;
  INSERT INTO cyclone_outbox (step_id, run_id, queue, kind, node_type, priority, due_at)
  VALUES (NEW.id, NEW.run_id, NEW.queue, NEW.kind, NEW.node_type, NEW.priority, NEW.scheduled_at);
  IF NEW.scheduled_at > now() THEN
    PERFORM pg_notify('cyclone_outbox', '');
  END IF;
  RETURN NULL;
END $$;
