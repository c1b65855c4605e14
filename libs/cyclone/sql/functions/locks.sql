-- The run locks. Every transition takes the lock of a step's run before any
-- step lock, and the locks of many runs in run id order, so two writers of
-- one run (or two batches sharing runs) never deadlock. The run lock also
-- serialises routing and settling.

-- Locks the run of one step; returns the run id, NULL for an unknown step.
CREATE OR REPLACE FUNCTION cyclone_lock_run_of(p_step_id bigint) RETURNS uuid
LANGUAGE sql AS $$
  SELECT r.id FROM cyclone_runs r
   WHERE r.id = (SELECT run_id FROM cyclone_steps WHERE id = p_step_id)
     FOR UPDATE OF r;
$$;

-- Locks the runs of many steps, in run id order.
CREATE OR REPLACE FUNCTION cyclone_lock_runs_of(p_step_ids bigint[]) RETURNS void
LANGUAGE sql AS $$
  SELECT NULL FROM cyclone_runs r
   WHERE r.id IN (SELECT run_id FROM cyclone_steps WHERE id = ANY (p_step_ids))
   ORDER BY r.id
     FOR UPDATE OF r;
$$;
