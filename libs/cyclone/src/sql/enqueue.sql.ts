import { statement, type StatementParams } from '../database/statement.js';
import type { ClaimedStep } from './claim.sql.js';

/**
 * Inserts a standalone job (sql/functions/insert-jobs.sql) and says whether
 * it is due now. With `notify` (inside a caller's transaction) the insert
 * also sends the queue's wake-up: NOTIFY is delivered on commit, so it goes
 * out only if the business write commits. Otherwise the client publishes the
 * wake-up after the commit, coalesced with others (see WakePublisher). The
 * run keeps the enqueuer's trace context. A unique key already held by an
 * unfinished run makes the insert do nothing (no error that would abort the
 * caller's transaction): the statement returns no row.
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
    /** The step's backoff as an array literal ('{1000,2000}'), or null for the default. */
    backoffMs: string | null,
    flowKey: string | null,
    rateKey: string | null,
  ],
  { id: string; due: boolean }
>(
  'cyclone_enqueue_job',
  /* sql */ `
SELECT id, due
  FROM cyclone_insert_jobs(ARRAY[$1::uuid], ARRAY[$2::text], ARRAY[$3::jsonb], ARRAY[$4::text], ARRAY[$5::text],
                           ARRAY[$6::bigint], ARRAY[$7::smallint], ARRAY[$8::integer], ARRAY[$9::integer],
                           ARRAY[$10::bigint], ARRAY[$11::timestamptz], ARRAY[$12::bigint], ARRAY[$14::jsonb],
                           ARRAY[$15::text], ARRAY[$16::text], ARRAY[$17::text], $13)`,
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
 * Inserts many standalone jobs, of any kinds and options, in one statement
 * (sql/functions/insert-jobs.sql): one run and one step per job. Used by
 * enqueueMany, and by enqueue, whose concurrent calls share a statement (see
 * EnqueueBatcher); none has a unique key. One array per column, in the same
 * order. Returns the queues that have a job due now, for the wake-up.
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
SELECT DISTINCT queue
  FROM cyclone_insert_jobs($1::uuid[], $2::text[], $3::jsonb[], $4::text[], NULL, $5::bigint[], $6::smallint[],
                           $7::integer[], $8::integer[], $9::bigint[], $10::timestamptz[], $11::bigint[], $12::jsonb[],
                           $13::text[], $14::text[], $15::text[], false)
 WHERE due`,
  { prepared: true },
);

/** A row of ENQUEUE_AND_START: a step started in this client (woken null), a queue to wake (id null), or the floors. */
export interface EnqueueStartRow extends Omit<ClaimedStep, 'id'> {
  woken: string | null;
  id: string | null;
  /** On the last row (woken and id null), when the statement read the bands: the worker's floors moved on. */
  next_bands?: number[] | null;
  next_floors?: Date[] | null;
}

/**
 * ENQUEUE_JOBS, starting up to `startLimit` of the due jobs of `startQueue`
 * and `startKinds` in this client's idle workers in the same statement
 * (sql/functions/insert-and-start.sql), reading the queue from the worker's
 * floors. Returns the started steps, and the queues that still have due
 * jobs of the batch to wake.
 */
export const ENQUEUE_AND_START = statement<
  [
    ...StatementParams<typeof ENQUEUE_JOBS>,
    startQueue: string,
    startKinds: string[],
    startLimit: number,
    owner: string,
    leaseTtlMs: number,
    bands: number[],
    floors: Date[],
  ],
  EnqueueStartRow
>(
  'cyclone_enqueue_and_start',
  /* sql */ `
SELECT * FROM cyclone_insert_and_start_from($1::uuid[], $2::text[], $3::jsonb[], $4::text[], $5::bigint[], $6::smallint[],
                                            $7::integer[], $8::integer[], $9::bigint[], $10::timestamptz[], $11::bigint[],
                                            $12::jsonb[], $13::text[], $14::text[], $15::text[], $16, $17::text[], $18,
                                            $19, $20, $21::smallint[], $22::timestamptz[])`,
  { prepared: true },
);

/** ENQUEUE_AND_START on a schema before version 19, without floors. */
export const ENQUEUE_AND_START_WITHOUT_FLOORS = statement<
  [...StatementParams<typeof ENQUEUE_JOBS>, startQueue: string, startKinds: string[], startLimit: number, owner: string, leaseTtlMs: number],
  EnqueueStartRow
>(
  'cyclone_enqueue_and_start_without_floors',
  /* sql */ `
SELECT * FROM cyclone_insert_and_start($1::uuid[], $2::text[], $3::jsonb[], $4::text[], $5::bigint[], $6::smallint[],
                                       $7::integer[], $8::integer[], $9::bigint[], $10::timestamptz[], $11::bigint[],
                                       $12::jsonb[], $13::text[], $14::text[], $15::text[], $16, $17::text[], $18, $19, $20)`,
  { prepared: true },
);

/** Wakes the workers of the given queues on every replica. */
export const WAKE_QUEUES = statement<[queues: string[]]>(
  'cyclone_wake_queues',
  /* sql */ `SELECT pg_notify('cyclone_wake', queue) FROM unnest($1::text[]) AS queue`,
);
