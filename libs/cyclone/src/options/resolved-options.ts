import type { CycloneConnectionOptions, CycloneModuleOptions, ScheduleOptions } from './cyclone-module-options.interface.js';
import { toMs } from '../common/duration.js';
import { checkInteger, checkKnownKeys, checkName } from '../common/validate.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { WorkflowDefinition } from '../definitions/define-workflow.js';
import {
  DEFAULT_LEASE_TTL_MS,
  DEFAULT_MAX_PAYLOAD_BYTES,
  DEFAULT_PARTITION_MONTHS_AHEAD,
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_QUEUE,
  DEFAULT_RETENTION_MS,
  DEFAULT_SHUTDOWN_TIMEOUT_MS,
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
  /** As given; checked and compiled with the `@Step` schedules at startup (ScheduleRegistry). */
  schedules: ScheduleOptions[];
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
  'schedules',
  'isGlobal',
] as const;

const PARTITION_KEYS = ['monthsAhead', 'dropAfter'] as const;
const QUEUE_KEYS = ['workers', 'concurrency'] as const;

/** Validates module options at startup so that a typo fails the boot, not a job at 3 a.m. */
export function resolveOptions(options: CycloneModuleOptions = {}): ResolvedOptions {
  checkKnownKeys('CycloneModule options', options, KNOWN);
  const queues = new Map<string, number>();
  const queueCaps = new Map<string, number>();
  for (const [name, queue] of Object.entries(options.queues ?? { [DEFAULT_QUEUE]: { workers: DEFAULT_WORKERS } })) {
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
  const [minPoll, maxPoll] = options.pollInterval ?? DEFAULT_POLL_INTERVAL_MS;
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
    throw new InvalidOptionError(`Option "migrationsRun" must be true, false or 'verify'; got ${String(migrationsRun)}.`);
  }
  const workers = [...queues.values()].reduce((a, b) => a + b, 0);
  const workflows = options.workflows ?? [];
  if (!Array.isArray(workflows) || workflows.some((w) => !(w instanceof WorkflowDefinition))) {
    throw new InvalidOptionError(
      'Option "workflows" must be an array of workflows made with defineWorkflow(name).step(...)...',
    );
  }
  const partitions = options.partitions ?? {};
  if (typeof partitions !== 'object' || partitions === null) {
    throw new InvalidOptionError('Option "partitions" must be an object such as { monthsAhead: 3, dropAfter: \'30d\' }.');
  }
  checkKnownKeys('option "partitions"', partitions, PARTITION_KEYS);
  return {
    connection: options.connection,
    queues,
    queueCaps,
    queuesConfigured: options.queues !== undefined,
    leaseTtlMs,
    pollIntervalMs,
    maxReclaims:
      options.maxReclaims === undefined ? null : checkInteger(options.maxReclaims, 'maxReclaims', 0, 1_000_000),
    shutdownTimeoutMs: toMs(options.shutdownTimeout ?? DEFAULT_SHUTDOWN_TIMEOUT_MS, 'shutdownTimeout'),
    runWorkers: options.runWorkers ?? true,
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
    schedules,
  };
}
