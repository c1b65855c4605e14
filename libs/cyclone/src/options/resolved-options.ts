import type {
  ConnectRetryOptions,
  CycloneConnectionOptions,
  DispatchOptions,
  RedisClientLike,
  CycloneModuleOptions,
  PartitionOptions,
  ScheduleOptions,
} from './cyclone-module-options.interface.js';
import { toMs } from '../common/duration.js';
import { checkBoolean, checkInteger, checkKnownKeys, checkName, checkOptions } from '../common/validate.js';
import { describeValue } from '../cyclone.messages.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { CycloneError } from '../errors/cyclone.error.js';
import { errorMessage } from '../common/error-message.js';
import { WorkflowDefinition } from '../definitions/define-workflow.js';
import { isInstalled, requireOptional } from '../common/optional-peer.js';
import {
  DEFAULT_CONNECT_ATTEMPTS,
  DEFAULT_CONNECT_DELAY_MS,
  DEFAULT_LEASE_TTL_MS,
  DEFAULT_MAX_PAYLOAD_BYTES,
  DEFAULT_PARTITION_MONTHS_AHEAD,
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_QUEUE,
  DEFAULT_RETENTION_MS,
  DEFAULT_SHUTDOWN_TIMEOUT_MS,
  DEFAULT_STATEMENT_TIMEOUT_MS,
  DEFAULT_WORKERS,
} from '../cyclone.constants.js';

/** Module options with defaults applied and every value checked, durations in ms. */
export interface ResolvedOptions {
  connection?: CycloneConnectionOptions;
  queues: Map<string, number>;
  /** Cluster-wide caps on running steps, by queue (queues.<name>.concurrency). */
  queueCaps: Map<string, number>;
  /** Whether `queues` was given: without it, queues named by steps are served too. */
  queuesConfigured: boolean;
  leaseTtlMs: number;
  pollIntervalMs: [number, number];
  maxReclaims: number | null;
  shutdownTimeoutMs: number;
  runWorkers: boolean;
  migrationsRun: boolean | 'verify';
  retentionMs: number;
  maxPayloadBytes: number;
  poolSize: number;
  workflows: WorkflowDefinition[];
  partitionMonthsAhead: number;
  /** Null: partitions are never dropped. */
  partitionDropAfterMs: number | null;
  /** Whether spans are made: the option, else whether `@opentelemetry/api` is installed. */
  tracing: boolean;
  connectRetry: { attempts: number; delayMs: number };
  /** 0: the server's own setting. */
  statementTimeoutMs: number;
  /** As given; checked and compiled with the `@Step` schedules at startup (ScheduleRegistry). */
  schedules: ScheduleOptions[];
  /** Broker dispatch, or null when it is off. */
  dispatch: ResolvedDispatch | null;
}

export interface ResolvedDispatch {
  /** A URL (the password never logged), or the app's client to duplicate. */
  redis: { url: string; source: 'option' | 'CYCLONE_REDIS_URL' } | { client: RedisClientLike };
  shards: number;
  maxDeliveries: number;
  lostDispatchAfterMs: number;
  whenRedisDown: 'claim' | 'wait';
}

const KNOWN = [
  'connection',
  'queues',
  'leaseTtl',
  'pollInterval',
  'maxReclaims',
  'shutdownTimeout',
  'runWorkers',
  'migrationsRun',
  'retention',
  'maxPayloadBytes',
  'workflows',
  'partitions',
  'tracing',
  'connectRetry',
  'statementTimeout',
  'schedules',
  'dispatch',
  'isGlobal',
] as const;

const DISPATCH_KEYS = ['redis', 'shards', 'maxDeliveries', 'lostDispatchAfter', 'whenRedisDown'] as const;
const DEFAULT_LOST_DISPATCH_AFTER_MS = 10 * 60_000;

const PARTITION_KEYS = ['monthsAhead', 'dropAfter'] as const;
const QUEUE_KEYS = ['workers', 'concurrency'] as const;

/** Validates module options at startup so that a typo fails the boot, not a job at 3 a.m. */
export function resolveOptions(given: CycloneModuleOptions = {}): ResolvedOptions {
  try {
    return resolve(given);
  } catch (err) {
    if (err instanceof CycloneError) throw err;
    // A getter or proxy among the options threw while they were read.
    throw new InvalidOptionError(`Reading the CycloneModule options threw: ${errorMessage(err)}.`, err);
  }
}

function resolve(given: CycloneModuleOptions): ResolvedOptions {
  const options = checkOptions<CycloneModuleOptions>(given, 'CycloneModule options', KNOWN);
  const retry = checkOptions<ConnectRetryOptions>(options.connectRetry, 'connectRetry option', ['attempts', 'delay']);
  const queues = new Map<string, number>();
  const queueCaps = new Map<string, number>();
  const queueOptions = options.queues ?? { [DEFAULT_QUEUE]: { workers: DEFAULT_WORKERS } };
  if (typeof queueOptions !== 'object' || queueOptions === null || Array.isArray(queueOptions)) {
    throw new InvalidOptionError(`Option "queues" must be an object such as { default: { workers: 10 } }; got ${describeValue(queueOptions)}.`);
  }
  for (const [name, queue] of Object.entries(queueOptions)) {
    checkName(name, 'queues');
    if (typeof queue !== 'object' || queue === null) {
      throw new InvalidOptionError(`Option "queues.${name}" must be an object such as { workers: 10 }.`);
    }
    checkKnownKeys(`option "queues.${name}"`, queue, QUEUE_KEYS);
    queues.set(name, checkInteger(queue.workers, `queues.${name}.workers`, 0, 10_000));
    if (queue.concurrency !== undefined) {
      queueCaps.set(name, checkInteger(queue.concurrency, `queues.${name}.concurrency`, 1, 1_000_000));
    }
  }
  const schedules = options.schedules ?? [];
  if (!Array.isArray(schedules)) {
    throw new InvalidOptionError("Option \"schedules\" must be an array such as [{ name: 'nightly', cron: '0 3 * * *', kind: 'report' }].");
  }
  const pollInterval = options.pollInterval ?? DEFAULT_POLL_INTERVAL_MS;
  if (!Array.isArray(pollInterval) || pollInterval.length !== 2) {
    throw new InvalidOptionError(`Option "pollInterval" must be [min, max], such as ['100ms', '1s']; got ${describeValue(pollInterval)}.`);
  }
  const [minPoll, maxPoll] = pollInterval;
  const pollIntervalMs: [number, number] = [toMs(minPoll, 'pollInterval[0]'), toMs(maxPoll, 'pollInterval[1]')];
  if (pollIntervalMs[0] <= 0 || pollIntervalMs[1] < pollIntervalMs[0]) {
    throw new InvalidOptionError(
      `Option "pollInterval" must be [min, max] with 0 < min <= max; got [${pollIntervalMs.join(', ')}] ms.`,
    );
  }
  const leaseTtlMs = toMs(options.leaseTtl ?? DEFAULT_LEASE_TTL_MS, 'leaseTtl');
  if (leaseTtlMs < 30) throw new InvalidOptionError(`Option "leaseTtl" must be at least 30 ms; got ${leaseTtlMs} ms.`);
  const migrationsRun = options.migrationsRun ?? true;
  if (migrationsRun !== true && migrationsRun !== false && migrationsRun !== 'verify') {
    throw new InvalidOptionError(`Option "migrationsRun" must be true, false or 'verify'; got ${describeValue(migrationsRun)}.`);
  }
  const runWorkers = options.runWorkers ?? true;
  if (typeof runWorkers !== 'boolean') {
    throw new InvalidOptionError(`Option "runWorkers" must be true or false; got ${describeValue(runWorkers)}.`);
  }
  const connection = checkConnection(options.connection);
  const workers = [...queues.values()].reduce((a, b) => a + b, 0);
  const workflows = options.workflows ?? [];
  if (!Array.isArray(workflows) || workflows.some((w) => !(w instanceof WorkflowDefinition))) {
    throw new InvalidOptionError(
      'Option "workflows" must be an array of workflows made with defineWorkflow(name).step(...)...',
    );
  }
  const partitions = checkOptions<PartitionOptions>(options.partitions, 'partitions option', PARTITION_KEYS);
  return {
    connection,
    queues,
    queueCaps,
    queuesConfigured: options.queues !== undefined,
    leaseTtlMs,
    pollIntervalMs,
    maxReclaims:
      options.maxReclaims === undefined ? null : checkInteger(options.maxReclaims, 'maxReclaims', 0, 1_000_000),
    shutdownTimeoutMs: toMs(options.shutdownTimeout ?? DEFAULT_SHUTDOWN_TIMEOUT_MS, 'shutdownTimeout'),
    runWorkers,
    migrationsRun,
    retentionMs: toMs(options.retention ?? DEFAULT_RETENTION_MS, 'retention'),
    maxPayloadBytes: checkInteger(
      options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
      'maxPayloadBytes',
      1,
      256 * 1024 * 1024,
    ),
    // Handlers do not hold a connection while they run; claims, completions and
    // heartbeats borrow one briefly. A few per queue plus headroom for enqueues.
    poolSize: Math.min(10 + Math.ceil(workers / 4) + queues.size, 50),
    workflows,
    partitionMonthsAhead: checkInteger(
      partitions.monthsAhead ?? DEFAULT_PARTITION_MONTHS_AHEAD,
      'partitions.monthsAhead',
      1,
      24,
    ),
    partitionDropAfterMs: partitions.dropAfter === false ? null : toMs(partitions.dropAfter ?? 0, 'partitions.dropAfter'),
    tracing: resolveTracing(checkBoolean(options.tracing, 'tracing')),
    connectRetry: {
      attempts: checkInteger(retry.attempts ?? DEFAULT_CONNECT_ATTEMPTS, 'connectRetry.attempts', 1, 1_000),
      delayMs: toMs(retry.delay ?? DEFAULT_CONNECT_DELAY_MS, 'connectRetry.delay'),
    },
    statementTimeoutMs: toMs(options.statementTimeout ?? DEFAULT_STATEMENT_TIMEOUT_MS, 'statementTimeout'),
    schedules,
    dispatch: resolveDispatch(options.dispatch),
  };
}

/**
 * The `dispatch` option: its Redis (a URL, from the option or
 * CYCLONE_REDIS_URL, or the app's client) and limits. Dispatch needs the
 * `redis` package: a MissingDependencyError without it, before any
 * connection opens.
 */
function resolveDispatch(given: DispatchOptions | undefined): ResolvedDispatch | null {
  if (given === undefined) return null;
  const options = checkOptions<DispatchOptions>(given, 'dispatch option', DISPATCH_KEYS);
  const redisOption = checkOptions<{ url?: unknown; client?: unknown }>(options.redis, 'dispatch.redis option', ['url', 'client']);
  let redis: ResolvedDispatch['redis'];
  if (redisOption.client !== undefined) {
    const client = redisOption.client as { duplicate?: unknown } | null;
    if (redisOption.url !== undefined || typeof client?.duplicate !== 'function') {
      throw new InvalidOptionError(
        'Option "dispatch.redis" must be { url } or { client } with a node-redis client (createClient from "redis"), not both.',
      );
    }
    redis = { client: redisOption.client as RedisClientLike };
  } else {
    const fromOption = redisOption.url !== undefined;
    const url = fromOption ? redisOption.url : process.env.CYCLONE_REDIS_URL;
    const name = fromOption ? 'dispatch.redis.url' : 'CYCLONE_REDIS_URL';
    if (typeof url !== 'string' || !/^rediss?:\/\/./.test(url.trim())) {
      throw new InvalidOptionError(
        url === undefined
          ? 'Option "dispatch" needs a Redis: set dispatch.redis.url (or CYCLONE_REDIS_URL), such as redis://localhost:6379.'
          : `${fromOption ? 'Option "dispatch.redis.url"' : 'CYCLONE_REDIS_URL'} must be a Redis URL such as redis://localhost:6379; ` +
              `got ${typeof url === 'string' ? 'a string that is not one' : describeValue(url)} (${name}).`,
      );
    }
    redis = { url: url.trim(), source: fromOption ? 'option' : 'CYCLONE_REDIS_URL' };
  }
  const whenRedisDown = options.whenRedisDown ?? 'claim';
  if (whenRedisDown !== 'claim' && whenRedisDown !== 'wait') {
    throw new InvalidOptionError(`Option "dispatch.whenRedisDown" must be 'claim' or 'wait'; got ${describeValue(whenRedisDown)}.`);
  }
  const lostDispatchAfterMs = toMs(options.lostDispatchAfter ?? DEFAULT_LOST_DISPATCH_AFTER_MS, 'dispatch.lostDispatchAfter');
  if (lostDispatchAfterMs < 1_000) {
    throw new InvalidOptionError(`Option "dispatch.lostDispatchAfter" must be at least 1 s; got ${lostDispatchAfterMs} ms.`);
  }
  requireOptional('redis', 'The dispatch option');
  return {
    redis,
    shards: checkInteger(options.shards ?? 1, 'dispatch.shards', 1, 1_024),
    maxDeliveries: checkInteger(options.maxDeliveries ?? 10, 'dispatch.maxDeliveries', 1, 1_000_000),
    lostDispatchAfterMs,
    whenRedisDown,
  };
}

/**
 * The `tracing` option: `true` needs `@opentelemetry/api` (a
 * MissingDependencyError without it), `false` is off, unset is on when the
 * package is installed. Checked with the other options, before any
 * connection opens, so a missing package fails the start cleanly.
 */
function resolveTracing(option: boolean | undefined): boolean {
  if (option === undefined) return isInstalled('@opentelemetry/api');
  if (option) requireOptional('@opentelemetry/api', 'The tracing option');
  return option;
}

/** `{ url }` with a string, or `{ dataSource }` with a TypeORM DataSource; left out, the environment decides. */
function checkConnection(value: unknown): CycloneConnectionOptions | undefined {
  const connection = checkOptions<{ url?: unknown; dataSource?: unknown }>(value, 'connection option', ['url', 'dataSource']);
  if (value === undefined) return undefined;
  if ('dataSource' in connection) {
    const dataSource = connection.dataSource as { options?: { type?: unknown }; initialize?: unknown } | null;
    if ('url' in connection || typeof dataSource?.initialize !== 'function') {
      throw new InvalidOptionError('Option "connection" must be { url } or { dataSource } with a TypeORM DataSource, not both.');
    }
    return value as CycloneConnectionOptions;
  }
  if (connection.url !== undefined && (typeof connection.url !== 'string' || connection.url.trim() === '')) {
    throw new InvalidOptionError(`Option "connection.url" must be a PostgreSQL URL such as postgres://user:password@host:5432/db; got ${describeValue(connection.url)}.`);
  }
  return value as CycloneConnectionOptions;
}
