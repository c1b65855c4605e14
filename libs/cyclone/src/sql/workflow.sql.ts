/**
 * See cyclone_start_workflow in the migrations: the run, its nodes, and the
 * routing of its roots in one statement. Returns NULL when the unique key is
 * held.
 *
 * $1 run id, $2 workflow name, $3 graph, $4 input, $5 run queue, $6 unique key,
 * $7 retention ms, $8 node rows (JSON array).
 */
export const START_WORKFLOW = /* sql */ `
SELECT cyclone_start_workflow($1, $2, $3::jsonb, $4::jsonb, $5, $6, $7, $8::jsonb) AS id`;

/** See cyclone_signal in the migrations. $1 run id, $2 signal (node id), $3 payload. */
export const SIGNAL_RUN = /* sql */ `SELECT cyclone_signal($1, $2, $3::jsonb) AS outcome`;

/** See cyclone_pause_run in the migrations. Returns the state before. */
export const PAUSE_RUN = /* sql */ `SELECT cyclone_pause_run($1) AS previous`;

/** See cyclone_resume_run in the migrations. Returns the state before. */
export const RESUME_RUN = /* sql */ `SELECT cyclone_resume_run($1) AS previous`;

/** Stops claiming on a queue, on every client: each claim checks this table. */
export const PAUSE_QUEUE = /* sql */ `
INSERT INTO cyclone_paused_queues (queue) VALUES ($1) ON CONFLICT DO NOTHING`;

/** Restarts claiming on a queue and wakes its workers everywhere. */
export const RESUME_QUEUE = /* sql */ `
DELETE FROM cyclone_paused_queues WHERE queue = $1
RETURNING pg_notify('cyclone_wake', queue)`;

/** The paused queues. */
export const PAUSED_QUEUES = /* sql */ `SELECT queue FROM cyclone_paused_queues ORDER BY queue`;
