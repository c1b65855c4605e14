import { sqlMigration } from './sql-migration.js';

/**
 * Lookups of a run's nodes by state that a partial index could take instead
 * of the run id. A lookup whose predicate implies a partial index's looks to
 * the planner like a scan of that index; with statistics a little stale the
 * index seems nearly empty, and the scan walks every entry.
 *
 * - Routing looks for signal waits whose signal came early by run id and
 *   state = 'waiting_signal', which implied the timer index's predicate: with
 *   a few thousand runs newly waiting on an approval since the last analyse,
 *   each routing call scanned every waiting node (5.7 ms at 28,000 waiting
 *   nodes, growing with them, against 0.07 ms by run id). The timer index is
 *   now also keyed on a wake time being set, which no lookup by run or id
 *   names; waits without a timeout, which have no wake time, leave it.
 * - Resume found the queues to wake by run id and state = 'available', the
 *   claim index's predicate, under a backlog that index holds. It now takes
 *   them from the rows it restores.
 */
const UP = /* sql */ `
DROP INDEX cyclone_steps_wake;
CREATE INDEX cyclone_steps_wake ON cyclone_steps (wake_at)
  WHERE wake_at IS NOT NULL AND state IN ('waiting_timer', 'waiting_signal');

CREATE OR REPLACE FUNCTION cyclone_resume_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
  v_woken text[];
BEGIN
  SELECT state INTO v_state FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS DISTINCT FROM 'paused' THEN
    RETURN v_state;
  END IF;
  UPDATE cyclone_runs SET state = 'running', updated_at = now() WHERE id = p_run_id;
  WITH restored AS (
    UPDATE cyclone_steps
       SET state = paused_state, paused_state = NULL, updated_at = now()
     WHERE run_id = p_run_id AND state = 'paused'
    RETURNING queue, state
  )
  SELECT array_agg(DISTINCT queue) FILTER (WHERE state = 'available') INTO v_woken FROM restored;
  PERFORM pg_notify('cyclone_wake', queue) FROM unnest(v_woken) AS queue;
  PERFORM cyclone_release_successors(ARRAY[p_run_id]);
  PERFORM cyclone_settle_run(p_run_id);
  RETURN v_state;
END $$;
`;

const DOWN = /* sql */ `
DROP INDEX cyclone_steps_wake;
CREATE INDEX cyclone_steps_wake ON cyclone_steps (wake_at) WHERE state IN ('waiting_timer', 'waiting_signal');

CREATE OR REPLACE FUNCTION cyclone_resume_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
BEGIN
  SELECT state INTO v_state FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS DISTINCT FROM 'paused' THEN
    RETURN v_state;
  END IF;
  UPDATE cyclone_runs SET state = 'running', updated_at = now() WHERE id = p_run_id;
  UPDATE cyclone_steps
     SET state = paused_state, paused_state = NULL, updated_at = now()
   WHERE run_id = p_run_id AND state = 'paused';
  PERFORM pg_notify('cyclone_wake', queue)
     FROM (SELECT DISTINCT queue FROM cyclone_steps WHERE run_id = p_run_id AND state = 'available') woken;
  PERFORM cyclone_release_successors(ARRAY[p_run_id]);
  PERFORM cyclone_settle_run(p_run_id);
  RETURN v_state;
END $$;
`;

export class CycloneRunLookups1764835200000 extends sqlMigration('CycloneRunLookups1764835200000', 6, UP, DOWN) {}
