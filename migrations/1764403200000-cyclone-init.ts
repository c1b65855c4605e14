import { sqlMigration } from './sql-migration.js';

/**
 * Runs and steps. A standalone job is a run with one step whose node id is its
 * kind; a workflow run has one step row per node. Every column the lease,
 * timer and signal mechanisms need is here from the start, so later features
 * add behaviour, not columns.
 */
const UP = /* sql */ `
CREATE TABLE IF NOT EXISTS cyclone_schema_migrations (
  version    integer PRIMARY KEY,
  name       text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE cyclone_runs (
  id           uuid PRIMARY KEY,
  kind         text,                     -- step kind of a standalone job
  workflow     text,                     -- workflow name of a workflow run
  graph        jsonb,                    -- the workflow's nodes and edges, stored with the run
  state        text NOT NULL DEFAULT 'running'
               CHECK (state IN ('running', 'paused', 'completed', 'failed', 'cancelled')),
  queue        text NOT NULL,
  input        jsonb NOT NULL DEFAULT 'null',
  unique_key   text,
  retention    interval NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  finished_at  timestamptz,
  delete_after timestamptz,              -- finished_at + retention, set when the run finishes
  -- Set by a client waiting for the result: only then is the finish announced.
  -- A NOTIFY holds the server-wide notification lock through its commit, so
  -- announcing every finish would serialise all completions.
  notify_finish boolean NOT NULL DEFAULT false
);

-- At most one unfinished run per unique key. Enqueue inserts with
-- ON CONFLICT DO NOTHING against this index, so a duplicate never raises
-- inside the caller's transaction.
CREATE UNIQUE INDEX cyclone_runs_unique_key ON cyclone_runs (unique_key)
  WHERE unique_key IS NOT NULL AND state IN ('running', 'paused');

CREATE INDEX cyclone_runs_delete_after ON cyclone_runs (delete_after)
  WHERE delete_after IS NOT NULL;

CREATE TABLE cyclone_steps (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run_id           uuid NOT NULL REFERENCES cyclone_runs (id) ON DELETE CASCADE,
  node_id          text NOT NULL,
  kind             text NOT NULL,
  node_type        text NOT NULL DEFAULT 'step' CHECK (node_type IN ('step', 'signal', 'sleep')),
  queue            text NOT NULL,
  priority         smallint NOT NULL DEFAULT 0,
  state            text NOT NULL CHECK (state IN ('pending', 'available', 'running', 'waiting_signal',
                     'waiting_timer', 'paused', 'completed', 'discarded', 'cancelled')),
  paused_state     text,                 -- the state a paused step returns to on resume
  depends_on       text[] NOT NULL DEFAULT '{}',
  attempt          integer NOT NULL DEFAULT 1,
  max_attempts     integer NOT NULL,
  reclaims         integer NOT NULL DEFAULT 0,
  max_reclaims     integer,
  timeout          interval,             -- per attempt, measured from started_at on the database clock
  scheduled_at     timestamptz NOT NULL DEFAULT now(),
  wake_at          timestamptz,          -- when a timer fires or a signal wait times out
  started_at       timestamptz,
  finished_at      timestamptz,
  heartbeat_at     timestamptz,
  lease_owner      text,
  lease_expiry     timestamptz,
  lease_generation bigint NOT NULL DEFAULT 0,
  output           jsonb,
  error            text,
  error_kind       text CHECK (error_kind IN ('error', 'timeout', 'permanent', 'reclaim_limit', 'signal_timeout')),
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (run_id, node_id)
);

-- The claim: available rows of a queue in claim order. Partial, so it holds
-- only claimable rows and does not grow with the history.
CREATE INDEX cyclone_steps_claim ON cyclone_steps (queue, priority DESC, scheduled_at, id)
  WHERE state = 'available';

-- The recovery sweep: running steps by lease expiry.
CREATE INDEX cyclone_steps_lease ON cyclone_steps (lease_expiry)
  WHERE state = 'running';

-- Timers and signal-wait timeouts by wake time.
CREATE INDEX cyclone_steps_wake ON cyclone_steps (wake_at)
  WHERE state IN ('waiting_timer', 'waiting_signal');

-- Locks the run of a step and returns its id (NULL for an unknown step).
-- Every writer takes the run lock before any step lock, so two writers of
-- one run never deadlock; the run lock also serialises routing and settling.
CREATE FUNCTION cyclone_lock_run_of(p_step_id bigint) RETURNS uuid
LANGUAGE sql AS $$
  SELECT r.id FROM cyclone_runs r
   WHERE r.id = (SELECT run_id FROM cyclone_steps WHERE id = p_step_id)
     FOR UPDATE OF r;
$$;

-- Recomputes a run's state from its steps and announces a finish to waiting
-- clients. Callers hold
-- the run row lock, so two steps finishing at once cannot both miss the other.
-- Paused and cancelled are set by the client only; a paused run may still complete.
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

-- Makes pending successors of a completed node available once all their
-- upstream nodes are completed.
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

-- Completion. A compare-and-set on the lease a worker was given: a late or
-- duplicate completion (the step was reclaimed, cancelled or timed out) changes
-- nothing and returns false. Routing and the run's state change commit with it.
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

-- A failed attempt: consumed, then retried after p_retry_delay_ms or, when
-- attempts are exhausted or the error is permanent, discarded. An attempt whose
-- timeout elapsed on the database clock is recorded as a timeout whatever the
-- handler threw. Returns the step's new state, or NULL when the lease was lost.
CREATE FUNCTION cyclone_fail_step(p_step_id bigint, p_owner text, p_generation bigint,
                                  p_error text, p_error_kind text, p_retry_delay_ms bigint)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_run_id uuid;
  v_state  text;
BEGIN
  v_run_id := cyclone_lock_run_of(p_step_id);
  IF v_run_id IS NULL THEN
    RETURN NULL;
  END IF;

  UPDATE cyclone_steps s
     SET state        = f.next_state,
         attempt      = CASE WHEN f.next_state = 'discarded' THEN s.attempt ELSE s.attempt + 1 END,
         scheduled_at = CASE WHEN f.next_state = 'discarded' THEN s.scheduled_at
                             ELSE now() + p_retry_delay_ms * interval '1 millisecond' END,
         finished_at  = CASE WHEN f.next_state = 'discarded' THEN now() END,
         error        = p_error,
         error_kind   = f.error_kind,
         lease_owner  = NULL,
         lease_expiry = NULL,
         updated_at   = now()
    FROM (SELECT CASE WHEN timeout IS NOT NULL AND started_at + timeout <= now() THEN 'timeout'
                      ELSE p_error_kind END AS error_kind,
                 CASE WHEN p_error_kind = 'permanent' OR attempt >= max_attempts THEN 'discarded'
                      ELSE 'available' END AS next_state
            FROM cyclone_steps WHERE id = p_step_id) f
   WHERE s.id = p_step_id AND s.state = 'running'
     AND s.lease_owner = p_owner AND s.lease_generation = p_generation
  RETURNING s.state INTO v_state;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;

  IF v_state = 'discarded' THEN
    PERFORM cyclone_settle_run(v_run_id);
  END IF;
  RETURN v_state;
END $$;

-- Cancels a run and every unfinished step of it in one transaction. Running
-- handlers learn at their next heartbeat, which no longer matches a running row.
-- Returns the run's state before the call, or NULL for an unknown run.
CREATE FUNCTION cyclone_cancel_run(p_run_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
BEGIN
  SELECT state INTO v_state FROM cyclone_runs WHERE id = p_run_id FOR UPDATE;
  IF v_state IS NULL OR v_state IN ('completed', 'cancelled') THEN
    RETURN v_state;
  END IF;

  UPDATE cyclone_steps
     SET state = 'cancelled', paused_state = NULL, lease_expiry = NULL,
         finished_at = now(), updated_at = now()
   WHERE run_id = p_run_id AND state NOT IN ('completed', 'discarded', 'cancelled');

  UPDATE cyclone_runs
     SET state = 'cancelled', updated_at = now(), finished_at = now(), delete_after = now() + retention
   WHERE id = p_run_id;
  PERFORM pg_notify('cyclone_run_finished', p_run_id::text);
  RETURN v_state;
END $$;

-- Reopens discarded steps (one node, or all with p_node_id NULL). The retry is
-- not an attempt: max_attempts becomes the attempt it opens, so exactly one
-- more is allowed (also after a permanent error that left attempts unused). A
-- step discarded for its reclaim limit had its attempt unconsumed, so it keeps
-- the attempt and starts its reclaim count again. Returns how many reopened,
-- or -1 for an unknown run.
CREATE FUNCTION cyclone_retry_steps(p_run_id uuid, p_node_id text) RETURNS integer
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

`;

const DOWN = /* sql */ `
DROP FUNCTION IF EXISTS cyclone_retry_steps(uuid, text);
DROP FUNCTION IF EXISTS cyclone_cancel_run(uuid);
DROP FUNCTION IF EXISTS cyclone_fail_step(bigint, text, bigint, text, text, bigint);
DROP FUNCTION IF EXISTS cyclone_complete_step(bigint, text, bigint, jsonb);
DROP FUNCTION IF EXISTS cyclone_route(uuid, text);
DROP FUNCTION IF EXISTS cyclone_settle_run(uuid);
DROP FUNCTION IF EXISTS cyclone_lock_run_of(bigint);
DROP TABLE IF EXISTS cyclone_steps;
DROP TABLE IF EXISTS cyclone_runs;
`;

export class CycloneInit1764403200000 extends sqlMigration('CycloneInit1764403200000', 1, UP, DOWN) {}
