-- The run locks. Every transition takes the lock of a step's run before any
-- step lock, and the locks of many runs in run id order, so two writers of
-- one run (or two batches sharing runs) never deadlock. The run lock also
-- serialises routing and settling.

-- Locks one run; returns its id, NULL for an unknown run.
CREATE OR REPLACE FUNCTION cyclone_lock_run(p_run_id uuid) RETURNS uuid
LANGUAGE sql AS $$
  SELECT id FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
$$;

-- Locks many runs (duplicates allowed), in run id order.
CREATE OR REPLACE FUNCTION cyclone_lock_runs(p_run_ids uuid[]) RETURNS void
LANGUAGE sql AS $$
  SELECT NULL FROM cyclone_runs WHERE id = ANY (p_run_ids) ORDER BY id FOR UPDATE;
$$;
