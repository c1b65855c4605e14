-- The outbox row of a step that has just become available, written in the
-- same transaction (the triggers of migration 0014 call this), while
-- dispatch is on for the database; and a NOTIFY that wakes the publishers,
-- sent at commit, once per transaction whatever the number of rows.
CREATE OR REPLACE FUNCTION cyclone_dispatch_step() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM cyclone_dispatch WHERE active_until > now()) THEN
    RETURN NULL;
  END IF;
  INSERT INTO cyclone_outbox (step_id, run_id, queue, kind, node_type, priority, due_at)
  VALUES (NEW.id, NEW.run_id, NEW.queue, NEW.kind, NEW.node_type, NEW.priority, NEW.scheduled_at);
  PERFORM pg_notify('cyclone_outbox', '');
  RETURN NULL;
END $$;
