import { sqlMigration } from './sql-migration.js';

/**
 * Workflows: runs of many nodes routed by the database. The graph is stored
 * with the run, so any client can route any run, including runs started by
 * another version of the app. Every transition here takes the run lock first,
 * then step locks, like the others: a signal racing its timeout, a timer fired
 * by two replicas, a pause racing a completion each have exactly one outcome,
 * decided by whoever takes the run lock first and re-checked by the other.
 */
const UP = /* sql */ `
-- Signal and sleep nodes run no handler, so they have no step kind. A signal
-- that arrives before its node waits is kept on the node until it does.
ALTER TABLE cyclone_steps
  ALTER COLUMN kind DROP NOT NULL,
  ADD COLUMN signal       jsonb,
  ADD COLUMN signalled_at timestamptz;

-- Queues whose claiming is stopped on every client (pauseQueue).
CREATE TABLE cyclone_paused_queues (
  queue     text PRIMARY KEY,
  paused_at timestamptz NOT NULL DEFAULT now()
);

-- Routing. Pending nodes of the given runs whose upstream nodes are all
-- completed move on: a step becomes available, a sleep starts its timer, a
-- signal wait starts waiting (with its timeout). A signal wait whose signal
-- already arrived completes at once with it, which may release further nodes,
-- hence the loop. In a paused run nodes arrive paused. Queues that gained an
-- available step are woken. Callers hold the runs' locks. A standalone job is
-- a run of one node with nothing to route: every completion batch calls this,
-- so such runs are left out first, by one key lookup each.
CREATE OR REPLACE FUNCTION cyclone_release_successors(p_run_ids uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_runs     uuid[] := ARRAY(SELECT id FROM cyclone_runs WHERE id = ANY (p_run_ids) AND workflow IS NOT NULL);
  v_woken    text[];
  v_consumed integer;
BEGIN
  IF cardinality(v_runs) = 0 THEN
    RETURN;
  END IF;
  LOOP
    WITH ready AS (
      SELECT s.id, r.state = 'paused' AS paused,
             CASE s.node_type WHEN 'step' THEN 'available' WHEN 'sleep' THEN 'waiting_timer'
                              ELSE 'waiting_signal' END AS next,
             CASE s.node_type
               WHEN 'sleep' THEN now() + (r.graph #>> ARRAY['nodes', s.node_id, 'sleepMs'])::bigint * interval '1 millisecond'
               WHEN 'signal' THEN now() + (r.graph #>> ARRAY['nodes', s.node_id, 'timeoutMs'])::bigint * interval '1 millisecond'
             END AS wake_at
        FROM cyclone_steps s
        JOIN cyclone_runs r ON r.id = s.run_id
       WHERE s.run_id = ANY (v_runs)
         AND s.state = 'pending'
         AND NOT EXISTS (
           SELECT 1 FROM cyclone_steps u
            WHERE u.run_id = s.run_id AND u.node_id = ANY (s.depends_on) AND u.state <> 'completed')
    ), moved AS (
      UPDATE cyclone_steps s
         SET state        = CASE WHEN ready.paused THEN 'paused' ELSE ready.next END,
             paused_state = CASE WHEN ready.paused THEN ready.next END,
             wake_at      = ready.wake_at,
             scheduled_at = now(),
             updated_at   = now()
        FROM ready
       WHERE s.id = ready.id
      RETURNING s.queue, s.state
    )
    SELECT array_agg(DISTINCT queue) INTO v_woken FROM moved WHERE state = 'available';
    PERFORM pg_notify('cyclone_wake', queue) FROM unnest(v_woken) AS queue;

    UPDATE cyclone_steps
       SET state = 'completed', output = signal, wake_at = NULL, finished_at = now(), updated_at = now()
     WHERE run_id = ANY (v_runs) AND state = 'waiting_signal' AND signalled_at IS NOT NULL;
    GET DIAGNOSTICS v_consumed = ROW_COUNT;
    EXIT WHEN v_consumed = 0;
  END LOOP;
END $$;

-- Starts a workflow run: the run with its graph, one pending row per node,
-- then routing makes the roots move. Returns NULL when the unique key is held
-- by an unfinished run (nothing is written).
CREATE FUNCTION cyclone_start_workflow(p_run_id uuid, p_workflow text, p_graph jsonb, p_input jsonb, p_queue text,
                                       p_unique_key text, p_retention_ms bigint, p_nodes jsonb)
RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO cyclone_runs (id, workflow, graph, input, queue, unique_key, retention)
  VALUES (p_run_id, p_workflow, p_graph, p_input, p_queue, p_unique_key, p_retention_ms * interval '1 millisecond')
  ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state IN ('running', 'paused') DO NOTHING;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;

  INSERT INTO cyclone_steps (run_id, node_id, kind, node_type, queue, priority, state, depends_on,
                             max_attempts, max_reclaims, timeout)
  SELECT p_run_id, n.node_id, n.kind, n.node_type, n.queue, n.priority, 'pending', n.depends_on,
         n.max_attempts, n.max_reclaims, n.timeout_ms * interval '1 millisecond'
    FROM jsonb_to_recordset(p_nodes) AS n(node_id text, kind text, node_type text, queue text, priority smallint,
                                         depends_on text[], max_attempts integer, max_reclaims integer,
                                         timeout_ms bigint);

  PERFORM cyclone_release_successors(ARRAY[p_run_id]);
  RETURN p_run_id;
END $$;

-- Delivers a signal to the run's signal node of that name: completes it when
-- it waits, keeps it on the node when the node is not waiting yet (pending, or
-- paused). Returns 'delivered' or 'stored', or why nothing was done:
-- 'run_not_found', 'run_completed' / 'run_failed' / 'run_cancelled',
-- 'unknown_signal', 'already_signalled', 'node_discarded' (its wait timed out).
CREATE FUNCTION cyclone_signal(p_run_id uuid, p_name text, p_payload jsonb) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_run_state text;
  v_step      cyclone_steps%ROWTYPE;
BEGIN
  SELECT state INTO v_run_state FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_run_state IS NULL THEN
    RETURN 'run_not_found';
  END IF;
  IF v_run_state IN ('completed', 'failed', 'cancelled') THEN
    RETURN 'run_' || v_run_state;
  END IF;
  SELECT * INTO v_step FROM cyclone_steps
   WHERE run_id = p_run_id AND node_id = p_name AND node_type = 'signal'
     FOR UPDATE;
  IF NOT FOUND THEN
    RETURN 'unknown_signal';
  END IF;
  IF v_step.signalled_at IS NOT NULL OR v_step.state = 'completed' THEN
    RETURN 'already_signalled';
  END IF;
  IF v_step.state IN ('discarded', 'cancelled') THEN
    RETURN 'node_' || v_step.state;
  END IF;

  UPDATE cyclone_steps SET signal = p_payload, signalled_at = now(), updated_at = now() WHERE id = v_step.id;
  IF v_step.state <> 'waiting_signal' THEN
    RETURN 'stored';
  END IF;
  -- Routing consumes the signal it has just stored, and moves on below it.
  PERFORM cyclone_release_successors(ARRAY[p_run_id]);
  PERFORM cyclone_settle_run(p_run_id);
  RETURN 'delivered';
END $$;

-- Fires one due timer: a sleep completes (output null); a signal wait whose
-- timeout passed is discarded with error_kind 'signal_timeout', or completes
-- with output null when its node says onTimeout 'continue'. Re-checked under
-- the run lock and the step lock, so replicas firing the same timer, or a
-- signal racing the timeout, apply one outcome. Returns 'slept',
-- 'signal_timeout' or 'continued', or NULL when there was nothing to fire.
CREATE FUNCTION cyclone_fire_timer(p_step_id bigint) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_run_id  uuid;
  v_step    cyclone_steps%ROWTYPE;
  v_outcome text;
BEGIN
  v_run_id := cyclone_lock_run_of(p_step_id);
  IF v_run_id IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT * INTO v_step FROM cyclone_steps WHERE id = p_step_id FOR UPDATE;
  IF v_step.state NOT IN ('waiting_timer', 'waiting_signal') OR v_step.wake_at IS NULL OR v_step.wake_at > now() THEN
    RETURN NULL;
  END IF;

  IF v_step.state = 'waiting_timer' THEN
    v_outcome := 'slept';
  ELSIF (SELECT graph #>> ARRAY['nodes', v_step.node_id, 'onTimeout'] FROM cyclone_runs WHERE id = v_run_id) = 'continue' THEN
    v_outcome := 'continued';
  ELSE
    v_outcome := 'signal_timeout';
  END IF;

  UPDATE cyclone_steps
     SET state       = CASE WHEN v_outcome = 'signal_timeout' THEN 'discarded' ELSE 'completed' END,
         output      = CASE WHEN v_outcome = 'signal_timeout' THEN NULL ELSE 'null'::jsonb END,
         error       = CASE WHEN v_outcome = 'signal_timeout'
                            THEN format('No signal "%s" arrived before its timeout', node_id) END,
         error_kind  = CASE WHEN v_outcome = 'signal_timeout' THEN 'signal_timeout' END,
         wake_at     = NULL,
         finished_at = now(),
         updated_at  = now()
   WHERE id = p_step_id;

  PERFORM cyclone_release_successors(ARRAY[v_run_id]);
  PERFORM cyclone_settle_run(v_run_id);
  RETURN v_outcome;
END $$;

-- Pauses a running run: its pending, available and waiting nodes become
-- paused, keeping the state they return to. Running steps finish; nothing
-- below them moves until resume. Returns the run's state before the call, or
-- NULL for an unknown run.
CREATE FUNCTION cyclone_pause_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
BEGIN
  SELECT state INTO v_state FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS DISTINCT FROM 'running' THEN
    RETURN v_state;
  END IF;
  UPDATE cyclone_steps
     SET paused_state = state, state = 'paused', updated_at = now()
   WHERE run_id = p_run_id AND state IN ('pending', 'available', 'waiting_signal', 'waiting_timer');
  UPDATE cyclone_runs SET state = 'paused', updated_at = now() WHERE id = p_run_id;
  RETURN v_state;
END $$;

-- Resumes a paused run: paused nodes return to their prior state, nodes whose
-- upstreams completed meanwhile move on, signals that arrived meanwhile are
-- consumed, timers that came due fire at the next tick, and the run settles
-- (it may have finished or failed while paused). Returns the run's state
-- before the call, or NULL for an unknown run.
CREATE FUNCTION cyclone_resume_run(p_run_id uuid) RETURNS text
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
  -- The queues to wake come from the restored rows: a lookup by run id and
  -- state = 'available' would match the claim index's predicate, and the
  -- planner could scan that index, backlog and all, instead of the run's rows.
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

-- Retries as before, except that a reopened signal wait goes back to pending,
-- so that routing starts its wait (and its timeout) again.
CREATE OR REPLACE FUNCTION cyclone_retry_steps(p_run_id uuid, p_node_id text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
  v_count integer;
BEGIN
  SELECT state INTO v_state FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS NULL THEN
    RETURN -1;
  END IF;
  IF v_state = 'cancelled' THEN
    RETURN 0;
  END IF;

  UPDATE cyclone_steps
     SET state        = CASE WHEN v_state = 'paused' THEN 'paused' WHEN node_type = 'step' THEN 'available'
                             ELSE 'pending' END,
         paused_state = CASE WHEN v_state = 'paused' THEN
                          CASE WHEN node_type = 'step' THEN 'available' ELSE 'pending' END END,
         attempt      = CASE WHEN error_kind = 'reclaim_limit' THEN attempt ELSE attempt + 1 END,
         max_attempts = CASE WHEN error_kind = 'reclaim_limit' THEN attempt ELSE attempt + 1 END,
         reclaims     = CASE WHEN error_kind = 'reclaim_limit' THEN 0 ELSE reclaims END,
         error = NULL, error_kind = NULL, finished_at = NULL,
         scheduled_at = now(), updated_at = now()
   WHERE run_id = p_run_id AND state = 'discarded' AND (p_node_id IS NULL OR node_id = p_node_id);
  GET DIAGNOSTICS v_count = ROW_COUNT;

  IF v_count > 0 AND v_state = 'failed' THEN
    UPDATE cyclone_runs
       SET state = 'running', updated_at = now(), finished_at = NULL, delete_after = NULL
     WHERE id = p_run_id;
  END IF;
  IF v_count > 0 THEN
    PERFORM pg_notify('cyclone_wake', queue) FROM cyclone_runs WHERE id = p_run_id;
    -- A reopened signal wait waits again, with its full timeout.
    PERFORM cyclone_release_successors(ARRAY[p_run_id]);
  END IF;
  RETURN v_count;
END $$;

-- A snoozed step returns to available after a delay without consuming an
-- attempt; a compare-and-set on the lease, under the run lock like every
-- transition, so that it cannot slip past a pause in progress.
CREATE FUNCTION cyclone_snooze_step(p_step_id bigint, p_owner text, p_generation bigint, p_delay_ms bigint)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF cyclone_lock_run_of(p_step_id) IS NULL THEN
    RETURN false;
  END IF;
  UPDATE cyclone_steps
     SET state = 'available', scheduled_at = now() + p_delay_ms * interval '1 millisecond',
         lease_owner = NULL, lease_expiry = NULL, updated_at = now()
   WHERE id = p_step_id AND state = 'running' AND lease_owner = p_owner AND lease_generation = p_generation;
  RETURN FOUND;
END $$;

-- Hands steps back at shutdown: available at once, with neither an attempt
-- nor a reclaim counted, since nothing went wrong with them; their queues are
-- woken so other clients take them without waiting for a poll tick. Under the
-- runs' locks, like every transition. Returns how many were handed back.
CREATE FUNCTION cyclone_hand_back(p_ids bigint[], p_owner text, p_generations bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_queues text[];
BEGIN
  PERFORM cyclone_lock_runs_of(p_ids);
  WITH handed AS (
    UPDATE cyclone_steps s
       SET state = 'available', lease_owner = NULL, lease_expiry = NULL, updated_at = now()
      FROM unnest(p_ids, p_generations) AS t(id, generation)
     WHERE s.id = t.id AND s.state = 'running' AND s.lease_owner = p_owner AND s.lease_generation = t.generation
    RETURNING s.queue
  )
  SELECT array_agg(queue) INTO v_queues FROM handed;
  PERFORM pg_notify('cyclone_wake', queue) FROM (SELECT DISTINCT unnest(v_queues) AS queue) q;
  RETURN coalesce(cardinality(v_queues), 0);
END $$;

-- A step of a paused run never becomes claimable: a retry after backoff, a
-- reclaim, a snooze or a hand-back that would make it available makes it
-- paused instead, to become available on resume. One rule for every path
-- from running to available; the completion path never fires it.
CREATE FUNCTION cyclone_keep_paused() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM cyclone_runs WHERE id = NEW.run_id AND state = 'paused') THEN
    NEW.paused_state := NEW.state;
    NEW.state := 'paused';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER cyclone_steps_keep_paused
  BEFORE UPDATE OF state ON cyclone_steps
  FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.state = 'available')
  EXECUTE FUNCTION cyclone_keep_paused();
`;

const DOWN = /* sql */ `
DROP TRIGGER IF EXISTS cyclone_steps_keep_paused ON cyclone_steps;
DROP FUNCTION IF EXISTS cyclone_keep_paused();
DROP FUNCTION IF EXISTS cyclone_hand_back(bigint[], text, bigint[]);
DROP FUNCTION IF EXISTS cyclone_snooze_step(bigint, text, bigint, bigint);
DROP FUNCTION IF EXISTS cyclone_resume_run(uuid);
DROP FUNCTION IF EXISTS cyclone_pause_run(uuid);
DROP FUNCTION IF EXISTS cyclone_fire_timer(bigint);
DROP FUNCTION IF EXISTS cyclone_signal(uuid, text, jsonb);
DROP FUNCTION IF EXISTS cyclone_start_workflow(uuid, text, jsonb, jsonb, text, text, bigint, jsonb);

-- Retries as the first migration defined them.
CREATE OR REPLACE FUNCTION cyclone_retry_steps(p_run_id uuid, p_node_id text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
  v_count integer;
BEGIN
  SELECT state INTO v_state FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS NULL THEN
    RETURN -1;
  END IF;
  IF v_state = 'cancelled' THEN
    RETURN 0;
  END IF;

  UPDATE cyclone_steps
     SET state        = CASE WHEN v_state = 'paused' THEN 'paused' ELSE 'available' END,
         paused_state = CASE WHEN v_state = 'paused' THEN 'available' END,
         attempt      = CASE WHEN error_kind = 'reclaim_limit' THEN attempt ELSE attempt + 1 END,
         max_attempts = CASE WHEN error_kind = 'reclaim_limit' THEN attempt ELSE attempt + 1 END,
         reclaims     = CASE WHEN error_kind = 'reclaim_limit' THEN 0 ELSE reclaims END,
         error = NULL, error_kind = NULL, finished_at = NULL,
         scheduled_at = now(), updated_at = now()
   WHERE run_id = p_run_id AND state = 'discarded' AND (p_node_id IS NULL OR node_id = p_node_id);
  GET DIAGNOSTICS v_count = ROW_COUNT;

  IF v_count > 0 AND v_state = 'failed' THEN
    UPDATE cyclone_runs
       SET state = 'running', updated_at = now(), finished_at = NULL, delete_after = NULL
     WHERE id = p_run_id;
  END IF;
  IF v_count > 0 THEN
    PERFORM pg_notify('cyclone_wake', queue) FROM cyclone_runs WHERE id = p_run_id;
  END IF;
  RETURN v_count;
END $$;

-- Routing as the third migration left it.
CREATE OR REPLACE FUNCTION cyclone_release_successors(p_run_ids uuid[]) RETURNS void
LANGUAGE sql AS $$
  UPDATE cyclone_steps s
     SET state = 'available', scheduled_at = now(), updated_at = now()
   WHERE s.run_id = ANY (p_run_ids)
     AND s.state = 'pending'
     AND NOT EXISTS (
       SELECT 1 FROM cyclone_steps u
        WHERE u.run_id = s.run_id AND u.node_id = ANY (s.depends_on) AND u.state <> 'completed');
$$;

DROP TABLE IF EXISTS cyclone_paused_queues;
UPDATE cyclone_steps SET kind = node_type WHERE kind IS NULL;
ALTER TABLE cyclone_steps
  DROP COLUMN signalled_at,
  DROP COLUMN signal,
  ALTER COLUMN kind SET NOT NULL;
`;

export class CycloneWorkflows1764662400000 extends sqlMigration('CycloneWorkflows1764662400000', 4, UP, DOWN) {}
