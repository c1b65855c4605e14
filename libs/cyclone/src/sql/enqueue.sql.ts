/**
 * Inserts a standalone job, its run and its one step, in one statement, and
 * wakes the queue's workers when the job is due now. NOTIFY is delivered on
 * commit, so inside a caller's transaction the wake-up goes out only if the
 * business write commits. A unique key already held by an unfinished run makes
 * the run insert do nothing (no error that would abort the caller's
 * transaction), and with it the step insert; the statement returns no row.
 *
 * $1 run id, $2 kind, $3 input, $4 queue, $5 unique key, $6 retention ms,
 * $7 priority, $8 max attempts, $9 max reclaims, $10 timeout ms,
 * $11 process-at timestamp, $12 process-in ms.
 */
export const ENQUEUE_JOB = /* sql */ `
WITH run AS (
  INSERT INTO cyclone_runs (id, kind, input, queue, unique_key, retention)
  VALUES ($1, $2, $3::jsonb, $4, $5, $6 * interval '1 millisecond')
  ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state IN ('running', 'paused') DO NOTHING
  RETURNING id, queue
), step AS (
  INSERT INTO cyclone_steps (run_id, node_id, kind, queue, priority, state, max_attempts, max_reclaims,
                             timeout, scheduled_at)
  SELECT id, $2, $2, queue, $7, 'available', $8, $9, $10 * interval '1 millisecond',
         COALESCE($11::timestamptz, now() + $12 * interval '1 millisecond')
    FROM run
  RETURNING scheduled_at <= now() AS due
)
SELECT run.id, CASE WHEN step.due THEN pg_notify('cyclone_wake', run.queue) END AS wake
  FROM run, step`;

/** The run that holds a unique key, read after an insert that did nothing. */
export const FIND_UNIQUE_HOLDER = /* sql */ `
SELECT id FROM cyclone_runs
 WHERE unique_key = $1 AND state IN ('running', 'paused')`;

/**
 * Inserts many standalone jobs of one kind in one statement: one run and one
 * step per input, then one wake-up.
 *
 * $1 run ids, $2 inputs (JSON texts, same order), then $3.. as ENQUEUE_JOB's
 * $2, $4, $6..$12 (no unique key).
 */
export const ENQUEUE_MANY = /* sql */ `
WITH runs AS (
  INSERT INTO cyclone_runs (id, kind, input, queue, retention)
  SELECT id, $3, input::jsonb, $4, $5 * interval '1 millisecond'
    FROM unnest($1::uuid[], $2::text[]) AS t(id, input)
  RETURNING id, queue
), steps AS (
  INSERT INTO cyclone_steps (run_id, node_id, kind, queue, priority, state, max_attempts, max_reclaims,
                             timeout, scheduled_at)
  SELECT id, $3, $3, queue, $6, 'available', $7, $8, $9 * interval '1 millisecond',
         COALESCE($10::timestamptz, now() + $11 * interval '1 millisecond')
    FROM runs
  RETURNING scheduled_at <= now() AS due
)
SELECT count(*)::int AS inserted,
       CASE WHEN bool_or(due) THEN pg_notify('cyclone_wake', $4) END AS wake
  FROM steps`;
