import { sqlMigration } from './sql-migration.js';

/**
 * Completions in batches. A busy worker finishes many steps while one commit
 * is on its way to disk; recording them in one statement and one transaction
 * turns a commit flush and a round trip per step into one per batch, with
 * routing and settling done once for all the batch's runs. Single completions
 * are a batch of one: there is one completion path.
 */
const UP = /* sql */ `
-- Makes pending nodes of the given runs available once all their upstream
-- nodes are completed. Callers hold the runs' locks.
CREATE FUNCTION cyclone_release_successors(p_run_ids uuid[]) RETURNS void
LANGUAGE sql AS $$
  UPDATE cyclone_steps s
     SET state = 'available', scheduled_at = now(), updated_at = now()
   WHERE s.run_id = ANY (p_run_ids)
     AND s.state = 'pending'
     AND NOT EXISTS (
       SELECT 1 FROM cyclone_steps u
        WHERE u.run_id = s.run_id AND u.node_id = ANY (s.depends_on) AND u.state <> 'completed');
$$;

-- Recomputes the state of the given runs from their steps and announces a
-- finish to waiting clients. Callers hold the runs' locks, so two steps
-- finishing at once cannot both miss the other. Paused and cancelled are set by
-- the client only; a paused run may still complete. A run fails once a step is
-- discarded and nothing else of it can move on.
CREATE FUNCTION cyclone_settle_runs(p_run_ids uuid[]) RETURNS void
LANGUAGE sql AS $$
  WITH next AS (
    SELECT r.id,
           CASE
             WHEN bool_and(s.state = 'completed') THEN 'completed'
             WHEN r.state = 'running' AND bool_or(s.state = 'discarded')
                  AND NOT bool_or(s.state IN ('available', 'running', 'waiting_signal', 'waiting_timer', 'paused'))
               THEN 'failed'
           END AS state
      FROM cyclone_runs r
      JOIN cyclone_steps s ON s.run_id = r.id
     WHERE r.id = ANY (p_run_ids) AND r.state IN ('running', 'paused')
     GROUP BY r.id, r.state
  ), settled AS (
    UPDATE cyclone_runs r
       SET state = next.state, updated_at = now(), finished_at = now(), delete_after = now() + r.retention
      FROM next
     WHERE r.id = next.id AND next.state IS NOT NULL
    RETURNING r.id, r.notify_finish
  )
  SELECT pg_notify('cyclone_run_finished', id::text) FROM settled WHERE notify_finish;
$$;

-- One run, for the transitions that settle a single run.
CREATE OR REPLACE FUNCTION cyclone_settle_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM cyclone_settle_runs(ARRAY[p_run_id]);
  RETURN (SELECT state FROM cyclone_runs WHERE id = p_run_id);
END $$;

-- Locks the runs of many steps, in run id order: every transition takes its
-- run locks before its step locks, and in one order, so two batches sharing
-- runs cannot deadlock.
CREATE FUNCTION cyclone_lock_runs_of(p_step_ids bigint[]) RETURNS void
LANGUAGE sql AS $$
  SELECT NULL FROM cyclone_runs r
   WHERE r.id IN (SELECT run_id FROM cyclone_steps WHERE id = ANY (p_step_ids))
   ORDER BY r.id
     FOR UPDATE OF r;
$$;

-- Completes many steps of one worker: a compare-and-set on each step's lease
-- (owner, generation, and the timeout on the database clock), so a late or
-- duplicate completion changes nothing. The runs are locked first; routing
-- and the runs' state changes commit with the steps. Returns the ids of the
-- steps it completed.
CREATE FUNCTION cyclone_complete_steps(p_ids bigint[], p_owner text, p_generations bigint[], p_outputs jsonb[])
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_ids  bigint[] := '{}';
  v_runs uuid[] := '{}';
  v_run  uuid;
BEGIN
  PERFORM cyclone_lock_runs_of(p_ids);

  -- One primary-key lookup per step. A join with the arrays leaves the plan
  -- to the table's statistics, and on a young table (not analysed yet) or a
  -- freshly vacuumed one they made the planner scan the table for every batch.
  FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
    UPDATE cyclone_steps
       SET state = 'completed', output = p_outputs[i], error = NULL, error_kind = NULL,
           finished_at = now(), updated_at = now(), lease_expiry = NULL
     WHERE id = p_ids[i] AND state = 'running'
       AND lease_owner = p_owner AND lease_generation = p_generations[i]
       AND (timeout IS NULL OR started_at + timeout > now())
    RETURNING run_id INTO v_run;
    IF FOUND THEN
      v_ids := v_ids || p_ids[i];
      v_runs := v_runs || v_run;
    END IF;
  END LOOP;
  IF cardinality(v_ids) = 0 THEN
    RETURN;
  END IF;

  PERFORM cyclone_release_successors(v_runs);
  PERFORM cyclone_settle_runs(v_runs);
  RETURN QUERY SELECT unnest(v_ids);
END $$;

DROP FUNCTION cyclone_complete_step(bigint, text, bigint, jsonb);
DROP FUNCTION cyclone_route(uuid, text);
`;

const DOWN = /* sql */ `
-- Restores the single-step completion of the first migration.
DROP FUNCTION cyclone_complete_steps(bigint[], text, bigint[], jsonb[]);
DROP FUNCTION cyclone_settle_run(uuid);
DROP FUNCTION cyclone_settle_runs(uuid[]);
DROP FUNCTION cyclone_release_successors(uuid[]);
DROP FUNCTION cyclone_lock_runs_of(bigint[]);

CREATE FUNCTION cyclone_settle_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state  text;
  v_next   text;
  v_notify boolean;
BEGIN
  SELECT state INTO v_state FROM cyclone_runs WHERE id = p_run_id;
  IF v_state IS NULL OR v_state NOT IN ('running', 'paused') THEN
    RETURN v_state;
  END IF;

  SELECT CASE
           WHEN bool_and(state = 'completed') THEN 'completed'
           WHEN v_state = 'running' AND bool_or(state = 'discarded')
                AND NOT bool_or(state IN ('available', 'running', 'waiting_signal', 'waiting_timer', 'paused'))
             THEN 'failed'
           ELSE v_state
         END
    INTO v_next
    FROM cyclone_steps WHERE run_id = p_run_id;

  IF v_next <> v_state THEN
    UPDATE cyclone_runs
       SET state = v_next, updated_at = now(), finished_at = now(), delete_after = now() + retention
     WHERE id = p_run_id
    RETURNING notify_finish INTO v_notify;
    IF v_notify THEN
      PERFORM pg_notify('cyclone_run_finished', p_run_id::text);
    END IF;
  END IF;
  RETURN v_next;
END $$;

CREATE FUNCTION cyclone_route(p_run_id uuid, p_node_id text) RETURNS void
LANGUAGE sql AS $$
  UPDATE cyclone_steps s
     SET state = 'available', scheduled_at = now(), updated_at = now()
   WHERE s.run_id = p_run_id
     AND s.state = 'pending'
     AND p_node_id = ANY (s.depends_on)
     AND NOT EXISTS (
       SELECT 1 FROM cyclone_steps u
        WHERE u.run_id = s.run_id AND u.node_id = ANY (s.depends_on) AND u.state <> 'completed');
$$;

CREATE FUNCTION cyclone_complete_step(p_step_id bigint, p_owner text, p_generation bigint, p_output jsonb)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_run_id  uuid;
  v_node_id text;
BEGIN
  v_run_id := cyclone_lock_run_of(p_step_id);
  IF v_run_id IS NULL THEN
    RETURN false;
  END IF;

  UPDATE cyclone_steps
     SET state = 'completed', output = p_output, error = NULL, error_kind = NULL,
         finished_at = now(), updated_at = now(), lease_expiry = NULL
   WHERE id = p_step_id AND state = 'running'
     AND lease_owner = p_owner AND lease_generation = p_generation
     AND (timeout IS NULL OR started_at + timeout > now())
  RETURNING node_id INTO v_node_id;
  IF NOT FOUND THEN
    RETURN false;
  END IF;

  PERFORM cyclone_route(v_run_id, v_node_id);
  PERFORM cyclone_settle_run(v_run_id);
  RETURN true;
END $$;
`;

export class CycloneBatchCompletion1764576000000 extends sqlMigration(
  'CycloneBatchCompletion1764576000000',
  3,
  UP,
  DOWN,
) {}
