import { statement } from '../database/statement.js';
import { AVAILABLE_STEPS } from './available-steps.sql.js';
import type { RunState } from './names.js';

/*
 * The dashboard's reads. Each one is an index scan of a bounded number of
 * rows (the indexes are in migrations/0004-dashboard-indexes.sql), so a page
 * answers as fast with a million runs in the tables as with ten.
 *
 * Optional filters are written `($n IS NULL OR column = $n)`. These
 * statements are not prepared, so PostgreSQL plans each call with its
 * values: a filter that is NULL folds away, one that is given becomes a
 * plain condition the planner matches to its index.
 */

export interface QueueCountsRow {
  queue: string;
  /** Due steps waiting for a worker. */
  available: number;
  /** Steps that become available later (processIn/processAt, a retry's backoff, a snooze). */
  scheduled: number;
  running: number;
  /** Discarded steps still kept (their runs failed, unless retried). */
  failed: number;
  /** Steps of paused runs. */
  paused: number;
  oldest_available_ms: string | null;
  /** The queue is paused with pauseQueue. */
  queue_paused: boolean;
  /** Of the sample of latest finished steps: how many completed, how many were discarded. */
  completed_recently: number;
  discarded_recently: number;
  /** The time the sample covers, in seconds: the window, or less when the sample filled up first. */
  sample_seconds: number;
}

/**
 * Every queue that has steps waiting, running, failed, paused or finished,
 * or that is paused or served by this client, with its counts and
 * throughput. Throughput comes from the latest finished steps of each queue
 * within the window, at most `sample` of them: a queue finishing thousands a
 * second reads `sample` index entries, not a minute of history. The list of
 * queues that have finished steps is a loose index scan (one index descent a
 * queue).
 */
export const QUEUE_COUNTS = statement<[served: string[], windowSeconds: number, sample: number], QueueCountsRow>(
  'cyclone_dashboard_queue_counts',
  /* sql */ `
WITH RECURSIVE finished_queues (queue) AS (
  (SELECT queue FROM cyclone_steps WHERE state IN ('completed', 'discarded') ORDER BY queue LIMIT 1)
  UNION ALL
  SELECT (SELECT s.queue FROM cyclone_steps s
           WHERE s.state IN ('completed', 'discarded') AND s.queue > f.queue
           ORDER BY s.queue LIMIT 1)
    FROM finished_queues f
   WHERE f.queue IS NOT NULL
),
waiting AS (
  SELECT queue,
         count(*) FILTER (WHERE scheduled_at <= now())::int AS available,
         count(*) FILTER (WHERE scheduled_at > now())::int AS scheduled,
         (extract(epoch FROM now() - min(scheduled_at) FILTER (WHERE scheduled_at <= now())) * 1000)::bigint
           AS oldest_available_ms
    FROM ${AVAILABLE_STEPS} available
   GROUP BY queue
),
running AS (
  SELECT queue, count(*)::int AS running
    FROM cyclone_steps
   WHERE lease_expiry IS NOT NULL AND state = 'running'
   GROUP BY queue
),
held AS (
  SELECT queue,
         count(*) FILTER (WHERE state = 'discarded')::int AS failed,
         count(*) FILTER (WHERE state = 'paused')::int AS paused
    FROM cyclone_steps
   WHERE state IN ('discarded', 'paused')
   GROUP BY queue
),
queues AS (
  SELECT queue FROM waiting
  UNION SELECT queue FROM running
  UNION SELECT queue FROM held
  UNION SELECT queue FROM finished_queues WHERE queue IS NOT NULL
  UNION SELECT queue FROM cyclone_paused_queues
  UNION SELECT unnest($1::text[])
)
SELECT q.queue,
       COALESCE(w.available, 0) AS available,
       COALESCE(w.scheduled, 0) AS scheduled,
       COALESCE(r.running, 0) AS running,
       COALESCE(h.failed, 0) AS failed,
       COALESCE(h.paused, 0) AS paused,
       w.oldest_available_ms,
       EXISTS (SELECT 1 FROM cyclone_paused_queues p WHERE p.queue = q.queue) AS queue_paused,
       t.completed_recently,
       t.discarded_recently,
       t.sample_seconds
  FROM queues q
  LEFT JOIN waiting w ON w.queue = q.queue
  LEFT JOIN running r ON r.queue = q.queue
  LEFT JOIN held h ON h.queue = q.queue
 CROSS JOIN LATERAL (
   SELECT count(*) FILTER (WHERE sample.state = 'completed')::int AS completed_recently,
          count(*) FILTER (WHERE sample.state = 'discarded')::int AS discarded_recently,
          CASE WHEN count(*) < $3 THEN $2::float8
               ELSE greatest(extract(epoch FROM now() - min(sample.finished_at)), 0.001)::float8 END AS sample_seconds
     FROM (SELECT s.state, s.finished_at
             FROM cyclone_steps s
            WHERE s.queue = q.queue AND s.state IN ('completed', 'discarded')
              AND s.finished_at > now() - $2 * interval '1 second'
            ORDER BY s.finished_at DESC
            LIMIT $3) sample
 ) t
 ORDER BY q.queue`,
);

export interface RunListRow {
  id: string;
  kind: string | null;
  workflow: string | null;
  state: RunState;
  queue: string;
  unique_key: string | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
  /** When a run that waits only for delayed steps (processIn, a backoff, a snooze) is due; else null. */
  due_at: Date | null;
}

export type RunListParams = [
  state: string | null,
  /** A standalone job's kind or a workflow's name. */
  name: string | null,
  queue: string | null,
  /** Lowest id (inclusive) and highest id (exclusive) of the time range: UUIDv7 ids sort by creation time. */
  idFrom: string | null,
  idTo: string | null,
  /** A unique key, or a run id (`searchId`, when the text is a UUID). */
  searchKey: string | null,
  searchId: string | null,
  /** The keyset cursor: the last id of the page before. */
  cursor: string | null,
  limit: number,
];

const RUN_LIST_COLUMNS = 'id, kind, workflow, state, queue, unique_key, created_at, updated_at, finished_at';
const RUN_LIST_FILTERS = /* sql */ `
       ($1::text IS NULL OR state = $1)
   AND ($2::text IS NULL OR COALESCE(kind, workflow) = $2)
   AND ($3::text IS NULL OR queue = $3)
   AND ($4::uuid IS NULL OR id >= $4)
   AND ($5::uuid IS NULL OR id < $5)
   AND ($6::text IS NULL OR unique_key = $6 OR id = $7::uuid)`;

/**
 * The page's runs with, for each running one whose every unfinished step is
 * available later (none running, none due), when its first step is due: the
 * list shows it as scheduled, not running. Only the page's runs are looked
 * up, each by its own steps.
 */
const withDueAt = (page: string, order: 'ASC' | 'DESC') => /* sql */ `
SELECT r.*, d.due_at
  FROM (${page}) r
  LEFT JOIN LATERAL (
    SELECT min(s.scheduled_at) AS due_at
      FROM cyclone_steps s
     WHERE s.run_id = r.id AND s.state IN ('available', 'running')
    HAVING bool_and(s.state = 'available' AND s.scheduled_at > now())
  ) d ON r.state = 'running'
 ORDER BY r.id ${order}`;

/** A page of runs, newest first, older than the cursor (keyset paging: no OFFSET, however deep the page). */
export const LIST_RUNS_OLDER = statement<RunListParams, RunListRow>(
  'cyclone_dashboard_runs_older',
  withDueAt(
    /* sql */ `
SELECT ${RUN_LIST_COLUMNS}
  FROM cyclone_runs
 WHERE ${RUN_LIST_FILTERS.trim()}
   AND ($8::uuid IS NULL OR id < $8)
 ORDER BY id DESC
 LIMIT $9`,
    'DESC',
  ),
);

/** A page of runs newer than the cursor, oldest first (the caller reverses it). */
export const LIST_RUNS_NEWER = statement<RunListParams, RunListRow>(
  'cyclone_dashboard_runs_newer',
  withDueAt(
    /* sql */ `
SELECT ${RUN_LIST_COLUMNS}
  FROM cyclone_runs
 WHERE ${RUN_LIST_FILTERS.trim()}
   AND id > $8
 ORDER BY id ASC
 LIMIT $9`,
    'ASC',
  ),
);
