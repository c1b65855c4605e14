import { statement } from '../database/statement.js';

/**
 * Inserts a standalone job, its run and its one step, in one statement, and
 * says whether the job is due now. With `notify` (inside a caller's
 * transaction) the statement also sends the queue's wake-up: NOTIFY is
 * delivered on commit, so it goes out only if the business write commits.
 * Otherwise the client publishes the wake-up after the commit, coalesced with
 * others (see WakePublisher). The run keeps the enqueuer's trace context. A
 * unique key already held by an unfinished run makes the key insert do
 * nothing (no error that would abort the caller's transaction), and with it
 * the run and step inserts; the statement returns no row.
 */
export const ENQUEUE_JOB = statement<
  [
    runId: string,
    kind: string,
    input: string,
    queue: string,
    uniqueKey: string | null,
    retentionMs: number,
    priority: number,
    maxAttempts: number,
    maxReclaims: number | null,
    timeoutMs: number | null,
    processAt: Date | null,
    processInMs: number,
    notify: boolean,
    traceContext: string | null,
    backoffMs: number[] | null,
    flowKey: string | null,
    rateKey: string | null,
  ],
  { id: string; due: boolean }
>(
  'cyclone_enqueue_job',
  /* sql */ `
WITH key AS (
  INSERT INTO cyclone_unique_keys (unique_key, run_id)
  SELECT $5, $1 WHERE $5::text IS NOT NULL
  ON CONFLICT DO NOTHING
  RETURNING run_id
), run AS (
  INSERT INTO cyclone_runs (id, kind, input, queue, unique_key, retention, trace_context)
  SELECT $1, $2, $3::jsonb, $4, $5, $6 * interval '1 millisecond', $14::jsonb
   WHERE $5::text IS NULL OR EXISTS (SELECT 1 FROM key)
  RETURNING id, queue
), step AS (
  INSERT INTO cyclone_steps (run_id, node_id, kind, queue, priority, state, max_attempts, max_reclaims,
                             timeout, scheduled_at, backoff_ms, flow_key, rate_key)
  SELECT id, $2, $2, queue, $7, 'available', $8, $9, $10 * interval '1 millisecond',
         COALESCE($11::timestamptz, now() + $12 * interval '1 millisecond'), $15::bigint[], $16, $17
    FROM run
  RETURNING scheduled_at <= now() AS due
)
SELECT run.id, step.due, CASE WHEN step.due AND $13 THEN pg_notify('cyclone_wake', run.queue) END AS wake
  FROM run, step`,
);

/**
 * An enqueue whose unique key is held, with onConflict 'keep' or 'replace'
 * or a debounce (sql/functions/unique-conflict.sql): the holder, and what
 * was done to it; a null holder when the key was freed meanwhile.
 */
export const UNIQUE_CONFLICT = statement<
  [
    uniqueKey: string,
    kind: string,
    replace: boolean,
    input: string,
    flowKey: string | null,
    rateKey: string | null,
    debounceMs: number | null,
  ],
  { holder: string | null; outcome: 'kept' | 'replaced' | 'debounced' | 'started' | null }
>(
  'cyclone_unique_conflict',
  /* sql */ `SELECT holder, outcome FROM cyclone_unique_conflict($1, $2, $3, $4::jsonb, $5, $6, $7)`,
);

/** The run that holds a unique key, read after an insert that did nothing. */
export const FIND_UNIQUE_HOLDER = statement<[uniqueKey: string], { id: string }>(
  'cyclone_find_unique_holder',
  /* sql */ `SELECT run_id AS id FROM cyclone_unique_keys WHERE unique_key = $1`,
);

/**
 * Inserts many standalone jobs, of any kinds and options, in one statement:
 * one run and one step per job. Used by enqueueMany, and by enqueue, whose
 * concurrent calls share a statement (see EnqueueBatcher). One array per
 * column, in the same order. Returns the queues that have a job due now,
 * for the wake-up. Each step gets its kind's backoff per attempt (NULL for
 * the default backoff), so that any replica's sweep applies it.
 */
export const ENQUEUE_JOBS = statement<
  [
    runIds: string[],
    kinds: string[],
    inputs: string[],
    queues: string[],
    retentionMs: number[],
    priorities: number[],
    maxAttempts: number[],
    maxReclaims: (number | null)[],
    timeoutMs: (number | null)[],
    processAt: (Date | null)[],
    processInMs: number[],
    traceContexts: (string | null)[],
    /** Each job's backoff as an array literal ('{1000,2000}'), or null for the default. */
    backoffMs: (string | null)[],
    flowKeys: (string | null)[],
    rateKeys: (string | null)[],
  ],
  { queue: string }
>(
  'cyclone_enqueue_jobs',
  /* sql */ `
WITH jobs AS (
  SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::smallint[],
                       $7::integer[], $8::integer[], $9::bigint[], $10::timestamptz[], $11::bigint[],
                       $12::text[], $13::text[], $14::text[], $15::text[])
    AS t(id, kind, input, queue, retention_ms, priority, max_attempts, max_reclaims, timeout_ms,
         process_at, process_in_ms, trace_context, backoff_ms, flow_key, rate_key)
), runs AS (
  INSERT INTO cyclone_runs (id, kind, input, queue, retention, trace_context)
  SELECT id, kind, input::jsonb, queue, retention_ms * interval '1 millisecond', trace_context::jsonb FROM jobs
  RETURNING id
), steps AS (
  INSERT INTO cyclone_steps (run_id, node_id, kind, queue, priority, state, max_attempts, max_reclaims,
                             timeout, scheduled_at, backoff_ms, flow_key, rate_key)
  SELECT j.id, j.kind, j.kind, j.queue, j.priority, 'available', j.max_attempts, j.max_reclaims,
         j.timeout_ms * interval '1 millisecond',
         COALESCE(j.process_at, now() + j.process_in_ms * interval '1 millisecond'), j.backoff_ms::bigint[],
         j.flow_key, j.rate_key
    FROM jobs j JOIN runs USING (id)
  RETURNING queue, scheduled_at <= now() AS due
)
SELECT DISTINCT queue FROM steps WHERE due`,
  { prepared: true },
);

/** Wakes the workers of the given queues on every replica. */
export const WAKE_QUEUES = statement<[queues: string[]]>(
  'cyclone_wake_queues',
  /* sql */ `SELECT pg_notify('cyclone_wake', queue) FROM unnest($1::text[]) AS queue`,
);
