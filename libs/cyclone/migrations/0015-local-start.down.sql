-- Restores the schema as it was before version 15.

LOCK TABLE cyclone_runs, cyclone_steps IN ACCESS EXCLUSIVE MODE;

DROP INDEX cyclone_outbox_deferred;
DROP TRIGGER cyclone_steps_timer_insert ON cyclone_steps;
DROP TRIGGER cyclone_steps_timer_update ON cyclone_steps;
DROP FUNCTION cyclone_timer_set();
DROP FUNCTION cyclone_insert_and_start(uuid[], text[], jsonb[], text[], bigint[], smallint[], integer[], integer[], bigint[],
                                       timestamptz[], bigint[], jsonb[], text[], text[], text[], text, text[], integer,
                                       text, bigint);

-- The outbox's trigger as version 14 made it: it notified for every row.
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

DELETE FROM cyclone_schema_migrations WHERE version = 15;
