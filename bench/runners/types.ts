import type pg from 'pg';

export type SystemName =
  | 'cyclone'
  | 'cyclone-observed'
  | 'cyclone-redis'
  | 'pg-boss'
  | 'pg-boss-batch'
  | 'graphile-worker'
  | 'bullmq';
/** The systems a run compares by default. */
export const SYSTEMS: SystemName[] = ['cyclone', 'pg-boss', 'pg-boss-batch', 'graphile-worker', 'bullmq'];
/**
 * pg-boss's batch profile: ten fetch loops of batches of 1,000, each batch
 * run at once and completed in one statement, as pg-boss's users tune it
 * for throughput. Not the same number of jobs in flight as the others, so
 * it runs the drain (W1) only, as a peer's best.
 */
export const PG_BOSS_BATCH: SystemName = 'pg-boss-batch';
/** Peer profiles that run W1 only. */
export const W1_ONLY: SystemName[] = [PG_BOSS_BATCH];
/**
 * Cyclone with its metrics module and OpenTelemetry spans on (the API's
 * no-op tracer: no SDK registered), run beside plain Cyclone with `--metrics`
 * to measure what observability costs.
 */
export const OBSERVED: SystemName = 'cyclone-observed';
/**
 * Cyclone with broker dispatch (SPEC §17): steps reach the workers through
 * the outbox and Redis Streams instead of polling, run beside plain Cyclone
 * with `--dispatch=redis` against the bench's own redis-server.
 */
export const DISPATCHED: SystemName = 'cyclone-redis';
/** Where the orchestrator puts its redis-server's URL for the processes it starts (they inherit its environment). */
export const REDIS_URL_ENV = 'BENCH_REDIS_URL';
/** Cyclone's variants, which are compared with plain Cyclone rather than as peers. */
export const CYCLONE_VARIANTS: SystemName[] = [OBSERVED, DISPATCHED];

/** The payload of every benchmark job. */
export interface BenchPayload {
  i: number;
  /** W8: the key its per-key limit counts under. */
  key?: string;
  /** Producer's clock just before the enqueue call (W3). */
  sentAt?: number;
}

/** What a handler learns about the job it runs, in each system's terms. */
export interface JobMeta {
  /** The job's id in its system (Cyclone run id, pg-boss, graphile-worker or BullMQ job id). */
  runId: string;
  /**
   * A number that grows with every delivery of the job, for fencing external
   * writes: Cyclone's `ctx.fencingToken` (lease generation), pg-boss's
   * `retryCount`, graphile-worker's `attempts`, BullMQ's `attemptsStarted`.
   */
  token: number;
}

export type JobHandler = (payload: BenchPayload, meta: JobMeta) => Promise<void> | void;

export interface StartOptions {
  url: string;
  /** Worker slots (concurrency); 0 starts a producer only. */
  workers: number;
  /** Connection pool size for the peers; Cyclone sizes its own pool (see describe()). */
  poolSize: number;
  handler?: JobHandler;
  /** Settings of the crash test (W5): short lease / expiry so recovery happens within the run. */
  crash?: boolean;
  /**
   * Flow control (W8, W1L): a per-key concurrency limit over the payloads'
   * `key`, or a kind-wide limit. Only for runners with `flowControl`.
   */
  flow?: { perKey?: number; kindLimit?: number };
  /** W1R0: Cyclone's steps keep no history (`retention: 0`). */
  retention?: 0;
}

export interface SystemHandle {
  enqueue(payload: BenchPayload): Promise<void>;
  /** The system's bulk insert API. */
  enqueueMany(payloads: BenchPayload[]): Promise<void>;
  /** What this process's claims are marked with in the database (lease owner, pool id), if anything. */
  owner(): string | null;
  stop(): Promise<void>;
}

export interface Runner {
  system: SystemName;
  /** The configuration used, in words, for the report. */
  describe(workers: number, poolSize: number, crash?: boolean): string;
  start(options: StartOptions): Promise<SystemHandle>;
  /** Jobs queued or running (not yet finished). */
  pending(client: pg.ClientBase | pg.Pool): Promise<number>;
  /** Jobs completed successfully, of `total` enqueued into this database. */
  completed(client: pg.ClientBase | pg.Pool, total: number): Promise<number>;
  crash: CrashInspector;
  /**
   * Whether the runner can run W8 (a per-key concurrency limit shared by all
   * workers), or why not. W1L, a limit that never binds, is Cyclone's own.
   */
  flowControl: true | string;
  /** How W8's per-key limit is configured, in words, for the report. */
  describeFlow?(flow: { perKey: number }): string;
}

/** How the crash test finds the jobs a killed worker held, and sees them become claimable again. */
export interface CrashInspector {
  /** Whether kill→claimable can be measured at all; otherwise why not. */
  measurable: true | string;
  /** Ids of jobs held by the process `pid` whose claims are marked `owner`. */
  held(client: pg.ClientBase, owner: string | null, pid: number): Promise<string[]>;
  /** Of `ids`, those no longer held by the dead process (claimable, or claimed by another). */
  freed(client: pg.ClientBase, ids: string[], owner: string | null, killedAt: Date): Promise<string[]>;
  /** Backend pids of the system's LISTEN connections, to terminate them (none for a system that only polls). */
  listeners(client: pg.ClientBase): Promise<number[]>;
  /**
   * Of jobs whose enqueue failed with an outcome the system reported as
   * unknown (and whose ids it gave), how many exist: committed although the
   * caller was told it failed. Undefined when the system gives no ids.
   */
  committed?(client: pg.ClientBase, ids: string[]): Promise<number>;
}

/** Cyclone's own pool size for a client with `workers` slots on one queue (resolved-options.ts). */
export function cyclonePoolSize(workers: number): number {
  return Math.min(10 + Math.ceil(workers / 4) + 1, 50);
}

export const JOB_KIND = 'bench_job';
