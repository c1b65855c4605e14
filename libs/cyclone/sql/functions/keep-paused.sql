-- A step of a paused run never becomes claimable: a retry after backoff, a
-- reclaim, a snooze or a hand-back that would make it available makes it
-- paused instead, to become available on resume. One rule for every path
-- from running to available; the completion path never fires it.
CREATE OR REPLACE FUNCTION cyclone_keep_paused() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM cyclone_runs WHERE id = NEW.run_id AND state = 'paused') THEN
    NEW.paused_state := NEW.state;
    NEW.state := 'paused';
  END IF;
  RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER cyclone_steps_keep_paused
  BEFORE UPDATE OF state ON cyclone_steps
  FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.state = 'available')
  EXECUTE FUNCTION cyclone_keep_paused();
