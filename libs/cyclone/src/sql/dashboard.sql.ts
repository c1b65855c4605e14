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
  /** Outbox rows of the queue due and not yet published (broker dispatch), and the oldest one's age. */
  outbox_rows: number;
  outbox_oldest_ms: string | null;
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
outbox AS (
  SELECT queue, count(*)::int AS rows, (extract(epoch FROM now() - min(created_at)) * 1000)::bigint AS oldest_ms
    FROM cyclone_outbox
   WHERE due_at <= now()
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
       t.sample_seconds,
       COALESCE(o.rows, 0) AS outbox_rows,
       o.oldest_ms AS outbox_oldest_ms
  FROM queues q
  LEFT JOIN outbox o ON o.queue = q.queue
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

/** The runs list's filters, the first parameters of its statements and of BULK_TARGETS. */
export type RunListFilters = [
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
];

export type RunListParams = [
  ...filters: RunListFilters,
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

/**
 * The runs a bulk action would act on, newest first: those the runs list's
 * filters match ($1–$7, RunListFilters) in one of the action's states,
 * created at or before `upTo` (the newest the operator was shown; later runs
 * are left alone), at most `limit` of them.
 */
export const BULK_TARGETS = statement<
  [...filters: RunListFilters, states: RunState[], upTo: string | null, limit: number],
  { id: string }
>(
  'cyclone_dashboard_bulk_targets',
  /* sql */ `
SELECT id
  FROM cyclone_runs
 WHERE ${RUN_LIST_FILTERS.trim()}
   AND state = ANY ($8::text[])
   AND ($9::uuid IS NULL OR id <= $9)
 ORDER BY id DESC
 LIMIT $10`,
);

export interface ThroughputRow {
  minute: Date;
  /** Of the minute's latest finished steps read (at most the sample): how many, and how many completed and failed. */
  sampled: number;
  completed: number;
  failed: number;
  /**
   * When the sample is full, the seconds from the minute's first finished
   * step to the sample's oldest and newest, and how many of the sample
   * finished at its newest instant (one completion batch shares a time).
   */
  first_to_oldest_s: number | null;
  first_to_newest_s: number | null;
  at_newest: number | null;
}

/**
 * A queue's finished steps per minute over the last hour. Each minute reads
 * at most `sample` of its latest finished steps from cyclone_steps_finished,
 * and, when that many finished, the time of its first: a minute with fewer
 * is counted exactly, a busier one is estimated from the sample's rate over
 * the span from its first to its last finished step (see
 * DashboardReader.throughput). So the chart costs sixty short index scans and
 * at most sixty samples of rows (each a heap page at worst), however many
 * steps finished.
 */
export const QUEUE_THROUGHPUT = statement<[queue: string, sample: number], ThroughputRow>(
  'cyclone_dashboard_queue_throughput',
  /* sql */ `
SELECT m.minute, t.sampled, t.completed, t.failed,
       extract(epoch FROM t.oldest - f.first)::float8 AS first_to_oldest_s,
       extract(epoch FROM t.newest - f.first)::float8 AS first_to_newest_s,
       t.at_newest
  -- Sixty minutes from a series of integers, which the planner counts right: from one of
  -- timestamps it would expect a thousand, and the cost it then adds up would bring in the JIT.
  FROM (SELECT date_trunc('minute', now()) - k * interval '1 minute' AS minute FROM generate_series(0, 59) AS k) m
 CROSS JOIN LATERAL (
   SELECT count(*)::int AS sampled,
          count(*) FILTER (WHERE x.state = 'completed')::int AS completed,
          count(*) FILTER (WHERE x.state = 'discarded')::int AS failed,
          min(x.finished_at) AS oldest, max(x.finished_at) AS newest,
          count(*) FILTER (WHERE x.finished_at = x.newest)::int AS at_newest
     FROM (SELECT l.*, max(l.finished_at) OVER () AS newest
             FROM (SELECT s.state, s.finished_at
                     FROM cyclone_steps s
                    WHERE s.queue = $1 AND s.state IN ('completed', 'discarded')
                      AND s.finished_at >= m.minute AND s.finished_at < m.minute + interval '1 minute'
                    ORDER BY s.finished_at DESC
                    LIMIT $2) l) x
 ) t
 LEFT JOIN LATERAL (
   SELECT s.finished_at AS first
     FROM cyclone_steps s
    WHERE t.sampled >= $2 AND s.queue = $1 AND s.state IN ('completed', 'discarded')
      AND s.finished_at >= m.minute AND s.finished_at < m.minute + interval '1 minute'
    ORDER BY s.finished_at
    LIMIT 1
 ) f ON true
 ORDER BY m.minute`,
);

/**
 * The names the runs page offers in its pickers: the kinds (and workflow
 * names) and the queues that have runs, read by a loose index scan (one
 * index descent a name), the kinds clients registered, and the queues that
 * exist as pauseQueue knows them (workflow.sql.ts: registered at startup in
 * cyclone_queues, which holds every queue a client serves or its steps name,
 * or paused). At most `limit` of each.
 */
export const PICKER_NAMES = statement<[limit: number], { kinds: string[]; queues: string[] }>(
  'cyclone_dashboard_picker_names',
  /* sql */ `
WITH RECURSIVE run_names (name, n) AS (
  (SELECT COALESCE(kind, workflow), 1 FROM cyclone_runs ORDER BY COALESCE(kind, workflow) LIMIT 1)
  UNION ALL
  SELECT (SELECT COALESCE(r.kind, r.workflow) FROM cyclone_runs r
           WHERE COALESCE(r.kind, r.workflow) > p.name ORDER BY COALESCE(r.kind, r.workflow) LIMIT 1), p.n + 1
    FROM run_names p
   WHERE p.name IS NOT NULL AND p.n < $1
), run_queues (queue, n) AS (
  (SELECT queue, 1 FROM cyclone_runs ORDER BY queue LIMIT 1)
  UNION ALL
  SELECT (SELECT r.queue FROM cyclone_runs r WHERE r.queue > p.queue ORDER BY r.queue LIMIT 1), p.n + 1
    FROM run_queues p
   WHERE p.queue IS NOT NULL AND p.n < $1
), kinds AS (
  SELECT name FROM run_names WHERE name IS NOT NULL
  UNION SELECT kind FROM cyclone_step_kinds
), queues AS (
  SELECT queue FROM run_queues WHERE queue IS NOT NULL
  UNION SELECT queue FROM cyclone_queues
  UNION SELECT queue FROM cyclone_paused_queues
)
SELECT ARRAY(SELECT name FROM kinds ORDER BY name LIMIT $1) AS kinds,
       ARRAY(SELECT queue FROM queues ORDER BY queue LIMIT $1) AS queues`,
);

export interface ClientRow {
  id: string;
  host: string;
  pid: number;
  /** Slots per queue it serves. */
  queues: Record<string, number>;
  info: { version?: string };
  started_at: Date;
  heartbeat_at: Date;
  /** Its running steps per queue, counted from their leases. */
  running: Record<string, number>;
}

/**
 * The clients running now: those that refreshed their row within `staleMs`,
 * with how many steps each runs per queue, counted from the leases (the
 * running steps are few: at most the slots of every client).
 */
export const LIST_CLIENTS = statement<[staleMs: number], ClientRow>(
  'cyclone_dashboard_clients',
  /* sql */ `
WITH running AS (
  SELECT lease_owner, jsonb_object_agg(queue, n) AS running
    FROM (SELECT lease_owner, queue, count(*)::int AS n FROM cyclone_steps
           WHERE lease_expiry IS NOT NULL AND state = 'running'
           GROUP BY lease_owner, queue) r
   GROUP BY lease_owner
)
SELECT c.id, c.host, c.pid, c.queues, c.info, c.started_at, c.heartbeat_at, COALESCE(r.running, '{}') AS running
  FROM cyclone_clients c LEFT JOIN running r ON r.lease_owner = c.id
 WHERE c.heartbeat_at > now() - $1 * interval '1 millisecond'
 ORDER BY c.host, c.started_at, c.id`,
);
