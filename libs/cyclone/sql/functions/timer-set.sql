-- Tells the timer sweepers that a timer was set (a sleep, a signal wait's
-- timeout): with broker dispatch on they sleep until the next timer is due
-- instead of polling (timer.sweeper.ts), and look again on this NOTIFY,
-- sent at commit, once per transaction.
CREATE OR REPLACE FUNCTION cyclone_timer_set() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('cyclone_timer', '');
  RETURN NULL;
END $$;
