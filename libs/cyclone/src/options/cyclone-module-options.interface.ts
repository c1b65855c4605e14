import type { DataSource } from 'typeorm';
import type { Duration } from '../common/duration.js';
import type { WorkflowDefinition } from '../definitions/define-workflow.js';
import type { CatchUp } from '../interfaces/step-options.interface.js';

export type CycloneConnectionOptions = { url?: string } | { dataSource: DataSource };

export interface QueueOptions {
  /** How many steps of this queue one client runs at once. */
  workers: number;
  /**
   * At most this many running steps of the queue in the whole cluster, every
   * client together (give every client the same value). Default: no cap.
   */
  concurrency?: number;
}

/** A durable cron schedule: a run of `kind` at every tick, exactly once across every replica. */
export interface ScheduleOptions {
  /** The schedule's name, unique among the app's schedules (a `@Step` schedule is named by its kind). */
  name: string;
  /** 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first. */
  cron: string;
  kind: string;
  /** The input of each scheduled run. Default null. */
  input?: unknown;
  /** IANA time zone the expression is read in. Default UTC. */
  timezone?: string;
  /** After downtime: `'latest'` (default) starts the latest missed tick once, `'none'` skips missed ticks. */
  catchUp?: CatchUp;
}

/** How startup retries a database it cannot reach, as `@nestjs/typeorm`'s retryAttempts / retryDelay. */
export interface ConnectRetryOptions {
  /** Connection attempts before startup fails. Default 9. */
  attempts?: number;
  /** Wait between attempts. Default 3 s. */
  delay?: Duration;
}

export interface CycloneModuleOptions {
  /**
   * Where the tables live. Default: `CYCLONE_DATABASE_URL`, else `DATABASE_URL`,
   * else an embedded PostgreSQL for development (data in `.cyclone/`).
   */
  connection?: CycloneConnectionOptions;
  /** Queues this client serves and their concurrency. Default `{ default: { workers: 10 } }`. */
  queues?: Record<string, QueueOptions>;
  /** How long a claimed step stays owned without a heartbeat. Default 30 s. */
  leaseTtl?: Duration;
  /** Poll tick: a random value in [min, max) each tick. Default [100 ms, 1 s). */
  pollInterval?: [Duration, Duration];
  /** Reclaims after which a step whose worker keeps dying is discarded. Default unlimited. */
  maxReclaims?: number;
  /** How long shutdown waits for running handlers before aborting them. Default 10 s. */
  shutdownTimeout?: Duration;
  /** `false` makes an enqueue-only client. Default true. */
  runWorkers?: boolean;
  /** `true` applies migrations at startup, `'verify'` only checks, `false` does nothing. Default true. */
  migrationsRun?: boolean | 'verify';
  /** How long a finished run is kept before deletion. Default 7 days. */
  retention?: Duration;
  /** Largest accepted input or output, in bytes of JSON. Default 1 MiB. */
  maxPayloadBytes?: number;
  /**
   * Startup: how often to try the database before giving up, for a server
   * that is still starting. Default `{ attempts: 9, delay: '3s' }`; the
   * final error names the host and where the URL came from.
   */
  connectRetry?: ConnectRetryOptions;
  /**
   * The server's statement_timeout on Cyclone's own connections (not on a
   * DataSource of the app's): a statement that runs longer (a claim or a
   * heartbeat stuck behind a lock) is cancelled instead of holding its
   * caller forever; a call waits as long for a free connection. Default
   * 30 s; 0 leaves the server's setting.
   */
  statementTimeout?: Duration;
  /** Workflows this app starts or runs, made with `defineWorkflow`; checked at startup. */
  workflows?: WorkflowDefinition<any>[];
  /** The monthly partitions of runs and steps. */
  partitions?: PartitionOptions;
  /**
   * OpenTelemetry spans for enqueues and step attempts, through `@opentelemetry/api`
   * (the app registers the SDK). `true` needs the package; `false` turns spans off.
   * Default: on when `@opentelemetry/api` is installed.
   */
  tracing?: boolean;
  /** Cron schedules, besides those declared with `@Step(kind, { schedule })`. */
  schedules?: ScheduleOptions[];
  /**
   * Broker dispatch (docs/dispatch.md): steps reach the workers through a
   * transactional outbox and Redis Streams instead of every worker polling
   * PostgreSQL. Off when left out. Needs the `redis` package (node-redis).
   */
  dispatch?: DispatchOptions;
}

/**
 * A node-redis client the app made (`createClient` of the `redis` package).
 * Cyclone uses duplicates of it and leaves the client itself to the app.
 */
export interface RedisClientLike {
  duplicate(...args: never[]): unknown;
}

export interface DispatchOptions {
  /** The Redis to dispatch through: `{ url }` (default `CYCLONE_REDIS_URL`), or `{ client }`. Redis 6.2 or later. */
  redis: { url?: string } | { client: RedisClientLike };
  /** Streams per queue, to spread one queue over several Redis shards. Default 1. */
  shards?: number;
  /** Deliveries of one message after which its step fails with error_kind 'max_deliveries'. Default 10. */
  maxDeliveries?: number;
  /** How long a step may stay available with no dispatch pending before it is dispatched again. Default '10m'. */
  lostDispatchAfter?: Duration;
  /** While Redis cannot be reached: `'claim'` from PostgreSQL as without dispatch (default), or `'wait'`. */
  whenRedisDown?: 'claim' | 'wait';
}

export interface PartitionOptions {
  /** How many months of partitions to keep ready after the current one. Default 3. */
  monthsAhead?: number;
  /**
   * How long after a month ends its partitions may be dropped, once every
   * run in it is finished and past its retention; `false` never drops them
   * (rows are still deleted by retention). Default 0: as soon as that holds.
   */
  dropAfter?: Duration | false;
}
