import { statement } from '../database/statement.js';

/**
 * This client's row in cyclone_clients, inserted or refreshed: one
 * statement a refresh, which also deletes the rows of clients that have not
 * refreshed theirs for `staleMs` (they were killed, or lost the database),
 * so the table holds the clients running now and stays small.
 */
export const REFRESH_CLIENT = statement<
  [id: string, host: string, pid: number, queues: string, info: string, staleMs: number]
>(
  'cyclone_refresh_client',
  /* sql */ `
WITH gone AS (
  DELETE FROM cyclone_clients WHERE heartbeat_at < now() - $6 * interval '1 millisecond' AND id <> $1
)
INSERT INTO cyclone_clients AS c (id, host, pid, queues, info)
VALUES ($1, $2, $3, $4::jsonb, $5::jsonb)
ON CONFLICT (id) DO UPDATE SET queues = EXCLUDED.queues, info = EXCLUDED.info, heartbeat_at = now()`,
);

/** This client's row, deleted at shutdown. */
export const DELETE_CLIENT = statement<[id: string]>(
  'cyclone_delete_client',
  /* sql */ `DELETE FROM cyclone_clients WHERE id = $1`,
);

/** A step kind as a client records it, with the defaults an enqueue of it gets. */
export interface StepKindRecord {
  kind: string;
  queue: string;
  priority: number;
  max_attempts: number;
  timeout_ms: number | null;
  retention_ms: number;
  max_reclaims: number | null;
  backoff_ms: number[] | null;
  flow_key: string | null;
  limit_key_option: string | null;
  max_payload_bytes: number;
}

/**
 * Records this client's step kinds (a JSON array of StepKindRecord) for
 * cyclone_enqueue (sql/functions/enqueue.sql). The last client to start
 * with a kind sets its defaults.
 */
export const RECORD_STEP_KINDS = statement<[kinds: string, registeredBy: string]>(
  'cyclone_record_step_kinds',
  /* sql */ `
INSERT INTO cyclone_step_kinds AS k (kind, queue, priority, max_attempts, timeout_ms, retention_ms, max_reclaims,
                                     backoff_ms, flow_key, limit_key_option, max_payload_bytes, registered_by)
SELECT r.kind, r.queue, r.priority, r.max_attempts, r.timeout_ms, r.retention_ms, r.max_reclaims, r.backoff_ms,
       r.flow_key, r.limit_key_option, r.max_payload_bytes, $2
  FROM jsonb_to_recordset($1::jsonb) AS r(kind text, queue text, priority smallint, max_attempts integer,
                                          timeout_ms bigint, retention_ms bigint, max_reclaims integer,
                                          backoff_ms bigint[], flow_key text, limit_key_option text,
                                          max_payload_bytes integer)
ON CONFLICT (kind) DO UPDATE
   SET queue = EXCLUDED.queue, priority = EXCLUDED.priority, max_attempts = EXCLUDED.max_attempts,
       timeout_ms = EXCLUDED.timeout_ms, retention_ms = EXCLUDED.retention_ms, max_reclaims = EXCLUDED.max_reclaims,
       backoff_ms = EXCLUDED.backoff_ms, flow_key = EXCLUDED.flow_key, limit_key_option = EXCLUDED.limit_key_option,
       max_payload_bytes = EXCLUDED.max_payload_bytes, registered_by = EXCLUDED.registered_by, registered_at = now()`,
);
