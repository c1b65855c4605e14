import { statement } from '../database/statement.js';
import type { RunState } from './names.js';

/**
 * The run, its nodes, and the routing of its roots in one statement; NULL
 * when the unique key is held (sql/functions/start-workflow.sql).
 */
export const START_WORKFLOW = statement<
  [
    runId: string,
    workflow: string,
    graph: string,
    input: string,
    queue: string,
    uniqueKey: string | null,
    retentionMs: number,
    nodes: string,
    traceContext: string | null,
  ],
  { id: string | null }
>(
  'cyclone_start_workflow',
  /* sql */ `SELECT cyclone_start_workflow($1, $2, $3::jsonb, $4::jsonb, $5, $6, $7, $8::jsonb, $9::jsonb) AS id`,
);

/** Delivers or keeps a signal; returns what happened (sql/functions/signal.sql). */
export const SIGNAL_RUN = statement<[runId: string, name: string, payload: string], { outcome: string }>(
  'cyclone_signal',
  /* sql */ `SELECT cyclone_signal($1, $2, $3::jsonb) AS outcome`,
);

/** Pauses a run; returns its state before (sql/functions/pause-run.sql). */
export const PAUSE_RUN = statement<[runId: string], { previous: RunState | null }>(
  'cyclone_pause_run',
  /* sql */ `SELECT cyclone_pause_run($1) AS previous`,
);

/** Resumes a run; returns its state before (sql/functions/resume-run.sql). */
export const RESUME_RUN = statement<[runId: string], { previous: RunState | null }>(
  'cyclone_resume_run',
  /* sql */ `SELECT cyclone_resume_run($1) AS previous`,
);

/**
 * Whether queue $1 exists: a client serves it or a step names it (recorded
 * at startup in cyclone_queues), it holds runs, or it is paused.
 */
const QUEUE_KNOWN = /* sql */ `
  SELECT EXISTS (SELECT 1 FROM cyclone_queues WHERE queue = $1)
      OR EXISTS (SELECT 1 FROM cyclone_paused_queues WHERE queue = $1)
      OR EXISTS (SELECT 1 FROM cyclone_runs WHERE queue = $1) AS known`;

/** What pausing or resuming a queue did: nothing at all for a queue that does not exist. */
export interface QueueChangeRow {
  known: boolean;
  changed: boolean;
}

/** Stops claiming on a queue that exists, on every client: each claim checks this table. */
export const PAUSE_QUEUE = statement<[queue: string], QueueChangeRow>(
  'cyclone_pause_queue',
  /* sql */ `
WITH known AS (${QUEUE_KNOWN}),
paused AS (
  INSERT INTO cyclone_paused_queues (queue) SELECT $1 FROM known WHERE known ON CONFLICT DO NOTHING RETURNING queue
)
SELECT known, EXISTS (SELECT 1 FROM paused) AS changed FROM known`,
);

/** Restarts claiming on a queue and wakes its workers everywhere. */
export const RESUME_QUEUE = statement<[queue: string], QueueChangeRow>(
  'cyclone_resume_queue',
  /* sql */ `
WITH known AS (${QUEUE_KNOWN}),
resumed AS (
  DELETE FROM cyclone_paused_queues WHERE queue = $1 RETURNING pg_notify('cyclone_wake', queue)
),
-- With broker dispatch on, messages of the queue's steps were dropped while it was paused: dispatched again.
redispatched AS (
  SELECT cyclone_redispatch(NULL, $1) FROM resumed, cyclone_dispatch d WHERE d.active_until > now()
)
SELECT known, EXISTS (SELECT 1 FROM resumed) AS changed, (SELECT count(*) FROM redispatched) AS redispatched FROM known`,
);

/** The paused queues. */
export const PAUSED_QUEUES = statement<[], { queue: string }>(
  'cyclone_paused_queues',
  /* sql */ `SELECT queue FROM cyclone_paused_queues ORDER BY queue`,
);
