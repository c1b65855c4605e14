import { statement } from '../database/statement.js';
import type { ClaimedStep } from './claim.sql.js';

/**
 * Turns dispatch on for the database (or keeps it on) until `activeMs` from
 * now, with this client's shard count; says whether it was on already, and
 * the epoch last written to Redis (migrations/0014-broker-dispatch.sql).
 */
export const ACTIVATE_DISPATCH = statement<[shards: number, activeMs: number], { was_active: boolean; epoch: string | null }>(
  'cyclone_activate_dispatch',
  /* sql */ `
WITH before AS (SELECT active_until > now() AS active FROM cyclone_dispatch)
INSERT INTO cyclone_dispatch (shards, active_until) VALUES ($1, now() + $2 * interval '1 millisecond')
ON CONFLICT (only_row) DO UPDATE
   SET shards = EXCLUDED.shards, active_until = greatest(cyclone_dispatch.active_until, EXCLUDED.active_until)
RETURNING coalesce((SELECT active FROM before), false) AS was_active, epoch`,
);

/** Records a new epoch, if the recorded one is still `expected`: one client of many re-dispatches. */
export const ADVANCE_EPOCH = statement<[expected: string | null, next: string], { epoch: string }>(
  'cyclone_advance_epoch',
  /* sql */ `UPDATE cyclone_dispatch SET epoch = $2 WHERE epoch IS NOT DISTINCT FROM $1 RETURNING epoch`,
);

export const READ_EPOCH = statement<[], { epoch: string | null }>(
  'cyclone_read_epoch',
  /* sql */ `SELECT epoch FROM cyclone_dispatch`,
);

/** An outbox row taken for publication, with its stream's shard. */
export interface OutboxRow {
  id: string;
  step_id: string;
  run_id: string;
  queue: string;
  kind: string | null;
  node_type: string;
  shard: number;
}

/**
 * Due rows, highest priority first, locked for this transaction; rows of a
 * paused queue wait here until it is resumed. The shard is a hash of the
 * step id, kept non-negative (hashtextextended may be negative).
 */
export const TAKE_OUTBOX = statement<[limit: number, shards: number], OutboxRow>(
  'cyclone_take_outbox',
  /* sql */ `
SELECT id, step_id, run_id, queue, kind, node_type,
       (((hashtextextended(step_id::text, 0) % $2) + $2) % $2)::integer AS shard
  FROM cyclone_outbox
 WHERE due_at <= now() AND (next_attempt_at IS NULL OR next_attempt_at <= now())
   AND queue NOT IN (SELECT queue FROM cyclone_paused_queues)
 ORDER BY priority DESC, due_at, id
 LIMIT $1
   FOR UPDATE SKIP LOCKED`,
  { prepared: true },
);

export const DELETE_OUTBOX = statement<[ids: string[]]>(
  'cyclone_delete_outbox',
  /* sql */ `DELETE FROM cyclone_outbox WHERE id = ANY ($1::bigint[])`,
  { prepared: true },
);

/**
 * Redis refused the batch: each row is tried again after a backoff that
 * doubles per attempt, up to 10 s (and at once when a client sees Redis come
 * back: RETRY_OUTBOX_NOW).
 */
export const DEFER_OUTBOX = statement<[ids: string[]]>(
  'cyclone_defer_outbox',
  /* sql */ `
UPDATE cyclone_outbox
   SET attempts = attempts + 1,
       next_attempt_at = now() + least(power(2, attempts) * 500, 10000) * interval '1 millisecond'
 WHERE id = ANY ($1::bigint[])`,
);

/** Redis is back: rows waiting out a backoff go at once. */
export const RETRY_OUTBOX_NOW = statement<[]>(
  'cyclone_retry_outbox_now',
  /* sql */ `UPDATE cyclone_outbox SET next_attempt_at = NULL WHERE next_attempt_at IS NOT NULL`,
);

/**
 * Whether due rows wait to be published (the queues paused left out), and
 * how long until the next row not yet due (a delayed step, or one waiting
 * out a backoff) becomes due: the publisher's look when nothing woke it.
 */
export const OUTBOX_STATE = statement<[], { due: boolean; next_due_ms: number | null }>(
  'cyclone_outbox_state',
  /* sql */ `
SELECT EXISTS (SELECT 1 FROM cyclone_outbox
                WHERE due_at <= now() AND (next_attempt_at IS NULL OR next_attempt_at <= now())
                  AND queue NOT IN (SELECT queue FROM cyclone_paused_queues)) AS due,
       (extract(epoch FROM least((SELECT min(due_at) FROM cyclone_outbox WHERE due_at > now()),
                                 (SELECT min(next_attempt_at) FROM cyclone_outbox WHERE next_attempt_at > now()))
                           - now()) * 1000)::float8 AS next_due_ms`,
  { prepared: true },
);

/** The backlog: due rows, and how long the oldest has waited. */
export const OUTBOX_BACKLOG = statement<[], { rows: string; oldest_seconds: number | null }>(
  'cyclone_outbox_backlog',
  /* sql */ `
SELECT count(*) AS rows, extract(epoch FROM now() - min(created_at))::float8 AS oldest_seconds
  FROM cyclone_outbox WHERE due_at <= now()`,
);

/** Starts the steps that messages name (sql/functions/start-dispatched.sql). */
export const START_DISPATCHED = statement<
  [runIds: string[], ids: string[], kinds: string[], owner: string, leaseTtlMs: number, retryDelayMs: number],
  ClaimedStep
>(
  'cyclone_start_dispatched',
  /* sql */ `
SELECT id, run_id, node_id, kind, attempt, max_attempts, reclaims, lease_generation, timeout_ms, input, upstream,
       trace_context, wait_ms
  FROM cyclone_start_dispatched($1::uuid[], $2::bigint[], $3::text[], $4, $5, $6)`,
  { prepared: true },
);

/** Outbox rows for available steps that have none (sql/functions/redispatch.sql). */
export const REDISPATCH = statement<[olderThanMs: number | null, queue: string | null], { count: number }>(
  'cyclone_redispatch',
  /* sql */ `SELECT cyclone_redispatch($1 * interval '1 millisecond', $2) AS count`,
);

/** Fails the step of a message past maxDeliveries (sql/functions/fail-delivery.sql). */
export const FAIL_DELIVERY = statement<
  [runId: string, id: string, owner: string, error: string, retryDelayMs: number],
  { state: string | null }
>(
  'cyclone_fail_delivery',
  /* sql */ `SELECT cyclone_fail_delivery($1, $2, $3, $4, $5) AS state`,
);

/**
 * Dispatches available steps again after `delayMs`: their message reached a
 * client that does not run their kind, for another client of the queue.
 */
export const REQUEUE_DISPATCH = statement<[runIds: string[], ids: string[], delayMs: number]>(
  'cyclone_requeue_dispatch',
  /* sql */ `
INSERT INTO cyclone_outbox (step_id, run_id, queue, kind, node_type, priority, due_at)
SELECT s.id, s.run_id, s.queue, s.kind, s.node_type, s.priority, now() + $3 * interval '1 millisecond'
  FROM cyclone_steps s JOIN unnest($1::uuid[], $2::bigint[]) AS t(run_id, id) ON s.run_id = t.run_id AND s.id = t.id
 WHERE s.state = 'available'`,
);

