import type { OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type { Counter, Histogram, Registry } from 'prom-client';
import { DEFAULT_METRICS_SAMPLE_INTERVAL_MS } from '../cyclone.constants.js';
import { messages } from '../cyclone.messages.js';
import { optionalMs } from '../common/duration.js';
import { requireOptional } from '../common/optional-peer.js';
import { checkKnownKeys } from '../common/validate.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import type { DispatchStats } from '../dispatch/dispatch-stats.js';
import type { CycloneStats } from '../runtime/cyclone-stats.js';
import type { StepFinished } from '../runtime/engine-events.js';
import type { CycloneMetricsOptions, PrometheusRegistry } from './cyclone-metrics-options.interface.js';

const OPTION_NAMES = ['registry', 'prefix', 'sampleInterval'] as const;
/** Every metric's name after the prefix. */
export const METRIC_NAMES = [
  'jobs_enqueued_total',
  'workflows_started_total',
  'steps_finished_total',
  'step_duration_seconds',
  'step_wait_seconds',
  'queue_steps',
  'queue_oldest_available_seconds',
  'queue_paused',
  'leases_stranded',
  'loop_last_tick_age_seconds',
] as const;
/** The metrics of broker dispatch (SPEC §17), registered beside the others when the `dispatch` option is on. */
export const DISPATCH_METRIC_NAMES = [
  'outbox_rows',
  'outbox_oldest_seconds',
  'dispatch_published_total',
  'dispatch_redispatched_total',
  'dispatch_reclaimed_total',
  'dispatch_max_deliveries_total',
  'redis_up',
] as const;
/** Samples closer than this would make the loop a load on the database. */
const MIN_SAMPLE_INTERVAL_MS = 10;
const PREFIX = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
/** A handler's run time, from a few milliseconds to an hour. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
/** Due to claimed: a millisecond on an idle queue, minutes to hours behind a backlog. */
const WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
/** The states `queue_steps` reports for every queue: its backlog and its work in progress. */
const QUEUE_STATES = ['available', 'scheduled', 'running'] as const;

type Prom = typeof import('prom-client');

/**
 * The module's options, checked, with prom-client loaded.
 * @internal
 */
export interface ResolvedMetricsOptions {
  prom: Prom;
  registry: Registry;
  prefix: string;
  sampleIntervalMs: number;
}

/**
 * Checks the options and loads prom-client, when the app's modules are
 * defined (`forRoot`): a typo, or prom-client missing, fails before anything
 * connects.
 * @internal
 */
export function resolveMetricsOptions(options: CycloneMetricsOptions): ResolvedMetricsOptions {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError(messages.metricsOptionsNotObject(options));
  }
  checkKnownKeys('CycloneMetricsModule options', options, OPTION_NAMES);
  const prefix = options.prefix ?? 'cyclone_';
  if (typeof prefix !== 'string' || (prefix !== '' && !PREFIX.test(prefix))) {
    throw new InvalidOptionError(messages.invalidMetricsPrefix(prefix));
  }
  const sampleIntervalMs = optionalMs(options.sampleInterval, 'sampleInterval') ?? DEFAULT_METRICS_SAMPLE_INTERVAL_MS;
  if (sampleIntervalMs < MIN_SAMPLE_INTERVAL_MS) {
    throw new InvalidOptionError(messages.metricsSampleInterval(MIN_SAMPLE_INTERVAL_MS, sampleIntervalMs));
  }
  const prom = requireOptional<Prom>('prom-client', 'CycloneMetricsModule (cyclone-nestjs/metrics)');
  const registry = (options.registry ?? prom.register) as Registry;
  if (!isRegistry(registry)) throw new InvalidOptionError(messages.invalidRegistry(registry));
  return { prom, registry, prefix, sampleIntervalMs };
}

/**
 * Cyclone's Prometheus metrics. Counters and histograms count what this
 * process did (enqueues, attempts and their outcomes, run and wait times);
 * the queue and lease gauges show the whole cluster, as the `cyclone:metrics`
 * loop last read it from the database; loop ages are this process's. Every
 * label value is code-defined (queue, kind, outcome, state, loop): never a
 * run id, so the number of series stays bounded.
 */
export class CycloneMetrics implements OnModuleInit, OnModuleDestroy {
  /** The registry the metrics are in: the option's, else prom-client's `register`. */
  readonly registry: PrometheusRegistry;
  readonly prefix: string;
  private readonly names: string[] = [];
  private unobserve?: () => void;
  /** Queues reported so far: a queue that empties reports zeros rather than vanishing. */
  private readonly queues = new Set<string>();
  private jobsEnqueued!: Counter<'queue' | 'kind'>;
  private workflowsStarted!: Counter<'queue' | 'workflow'>;
  private stepsFinished!: Counter<'queue' | 'kind' | 'outcome'>;
  private stepDuration!: Histogram<'queue' | 'kind'>;
  private stepWait!: Histogram<'queue' | 'kind'>;
  /** The series of each queue and kind, looked up once: the hot paths then skip label checks and hashing. */
  private readonly byQueue = new Map<string, Map<string, KindSeries>>();

  private constructor(
    private readonly options: ResolvedMetricsOptions,
    private readonly stats: CycloneStats,
  ) {
    this.registry = options.registry;
    this.prefix = options.prefix;
  }

  /** @internal The module's factory. */
  static create(options: ResolvedMetricsOptions, stats: CycloneStats): CycloneMetrics {
    return new CycloneMetrics(options, stats);
  }

  /**
   * Registers the metrics once every provider exists, and asks for samples
   * before the maintenance loops start (at bootstrap). All or nothing: a
   * name another app registered in the same registry fails before the first.
   */
  onModuleInit(): void {
    const { prom, registry, prefix } = this.options;
    const stats = this.stats;
    const names = stats.dispatch ? [...METRIC_NAMES, ...DISPATCH_METRIC_NAMES] : METRIC_NAMES;
    const taken = names.map((n) => `${prefix}${n}`).find((n) => registry.getSingleMetric(n));
    if (taken) throw new InvalidOptionError(messages.metricRegisteredTwice(taken));
    const metrics = this;
    const registers = [registry];
    const name = (suffix: (typeof METRIC_NAMES)[number] | (typeof DISPATCH_METRIC_NAMES)[number]) => {
      this.names.push(`${prefix}${suffix}`);
      return `${prefix}${suffix}`;
    };
    this.jobsEnqueued = new prom.Counter({
      name: name('jobs_enqueued_total'),
      help: 'Jobs enqueued by this process (enqueue, enqueueTx, enqueueMany), once their insert returned.',
      labelNames: ['queue', 'kind'],
      registers,
    });
    this.workflowsStarted = new prom.Counter({
      name: name('workflows_started_total'),
      help: 'Workflow runs started by this process.',
      labelNames: ['queue', 'workflow'],
      registers,
    });
    this.stepsFinished = new prom.Counter({
      name: name('steps_finished_total'),
      help:
        'Attempts whose outcome this process committed: completed, failed (an error or a timeout; then retried or ' +
        'discarded says what followed, timed_out which were timeouts), snoozed, cancelled, reclaimed (by its sweep), ' +
        "suspended (a code workflow's pass that ended waiting for its nodes).",
      labelNames: ['queue', 'kind', 'outcome'],
      registers,
    });
    this.stepDuration = new prom.Histogram({
      name: name('step_duration_seconds'),
      help: "How long this process's handlers ran, per attempt, whatever became of it.",
      labelNames: ['queue', 'kind'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.stepWait = new prom.Histogram({
      name: name('step_wait_seconds'),
      help: 'From when a step was due to its claim by this process (database clock), plus any wait claimed ahead for a slot.',
      labelNames: ['queue', 'kind'],
      buckets: WAIT_BUCKETS,
      registers,
    });
    new prom.Gauge({
      name: name('queue_steps'),
      help: "Steps of each queue in the whole cluster: available (due now), scheduled (due later), running; sampled by the cyclone:metrics loop.",
      labelNames: ['queue', 'state'],
      registers,
      collect() {
        this.reset();
        for (const q of metrics.sampledQueues()) for (const state of QUEUE_STATES) this.set({ queue: q.queue, state }, q[state]);
      },
    });
    new prom.Gauge({
      name: name('queue_oldest_available_seconds'),
      help: 'How long the oldest due step of each queue has waited, in the whole cluster; 0 when none waits.',
      labelNames: ['queue'],
      registers,
      collect() {
        this.reset();
        for (const q of metrics.sampledQueues()) this.set({ queue: q.queue }, q.oldestAvailableMs / 1000);
      },
    });
    new prom.Gauge({
      name: name('queue_paused'),
      help: '1 for a queue stopped with pauseQueue (on every client), else 0.',
      labelNames: ['queue'],
      registers,
      collect() {
        this.reset();
        for (const q of metrics.sampledQueues()) this.set({ queue: q.queue }, q.paused ? 1 : 0);
      },
    });
    new prom.Gauge({
      name: name('leases_stranded'),
      help: 'Running steps whose lease expired more than two poll ticks ago and that no sweep has reclaimed (0 is healthy).',
      registers,
      collect() {
        this.set(stats.clusterSample?.strandedLeases ?? 0);
      },
    });
    new prom.Gauge({
      name: name('loop_last_tick_age_seconds'),
      help: "Seconds since each of this process's loops last finished a tick (since its start before the first).",
      labelNames: ['loop'],
      registers,
      collect() {
        this.reset();
        for (const loop of stats.loopStates()) {
          if (loop.lastTickAgeMs !== null) this.set({ loop: loop.name }, loop.lastTickAgeMs / 1000);
        }
      },
    });
    if (stats.dispatch) this.registerDispatch(prom, registers, name, stats.dispatch);
    this.unobserve = stats.events.observe({
      jobsEnqueued: (e) => this.series(e.queue, e.kind).enqueued.inc(e.count),
      workflowStarted: (e) => this.workflowsStarted.inc({ queue: e.queue, workflow: e.workflow }),
      stepStarted: (e) => this.series(e.queue, e.kind).wait.observe(e.waitMs / 1000),
      handlerRan: (e) => this.series(e.queue, e.kind).duration.observe(e.durationMs / 1000),
      stepFinished: (e) => this.finished(e),
    });
    stats.requestSamples(this.options.sampleIntervalMs);
  }

  /** Broker dispatch's gauges (the cluster's outbox, as sampled) and this process's counters. */
  private registerDispatch(
    prom: Prom,
    registers: Registry[],
    name: (suffix: (typeof DISPATCH_METRIC_NAMES)[number]) => string,
    dispatch: DispatchStats,
  ): void {
    const stats = this.stats;
    new prom.Gauge({
      name: name('outbox_rows'),
      help: 'Outbox rows due and not yet published, in the whole cluster; sampled by the cyclone:metrics loop.',
      registers,
      collect() {
        this.set(stats.clusterSample?.outbox?.rows ?? 0);
      },
    });
    new prom.Gauge({
      name: name('outbox_oldest_seconds'),
      help: 'How long the oldest due outbox row has waited for publication; 0 when none waits.',
      registers,
      collect() {
        this.set(stats.clusterSample?.outbox?.oldestSeconds ?? 0);
      },
    });
    const counter = (suffix: Parameters<typeof name>[0], help: string, label: string, values: Map<string, number>) =>
      new prom.Counter({
        name: name(suffix),
        help,
        labelNames: [label],
        registers,
        collect() {
          this.reset();
          for (const [key, n] of values) this.inc({ [label]: key }, n);
        },
      });
    counter('dispatch_published_total', 'Steps this process published to their queue\'s stream.', 'queue', dispatch.published);
    counter(
      'dispatch_redispatched_total',
      'Steps dispatched again by this process: lease_expired (its sweep reclaimed them), lost (no dispatch pending past lostDispatchAfter), epoch (Redis lost its data, or dispatch was off).',
      'reason',
      dispatch.redispatched,
    );
    counter('dispatch_reclaimed_total', 'Messages this process took over from a stopped consumer.', 'queue', dispatch.reclaimed);
    counter(
      'dispatch_max_deliveries_total',
      "Steps this process failed because their message was delivered more than maxDeliveries times.",
      'queue',
      dispatch.maxDeliveries,
    );
    new prom.Gauge({
      name: name('redis_up'),
      help: "1 while this process's Redis connection for dispatch is ready, else 0.",
      registers,
      collect() {
        this.set(dispatch.redisUp() ? 1 : 0);
      },
    });
  }

  /** The registry's exposition text, for a `/metrics` route. */
  metrics(): Promise<string> {
    return this.options.registry.metrics();
  }

  /** The `Content-Type` of `metrics()`. */
  get contentType(): string {
    return this.options.registry.contentType;
  }

  /** Takes Cyclone's metrics out of the registry, so another app in this process can register them. */
  onModuleDestroy(): void {
    this.unobserve?.();
    for (const name of this.names) this.options.registry.removeSingleMetric(name);
  }

  private finished(e: StepFinished): void {
    const series = this.series(e.queue, e.kind);
    series.finished(e.outcome).inc();
    if (e.failed) series.finished('failed').inc();
    if (e.failed && e.errorKind === 'timeout') series.finished('timed_out').inc();
  }

  private series(queue: string, kind: string): KindSeries {
    let kinds = this.byQueue.get(queue);
    if (!kinds) this.byQueue.set(queue, (kinds = new Map()));
    let series = kinds.get(kind);
    if (!series) {
      const outcomes = new Map<string, Counter.Internal>();
      series = {
        enqueued: this.jobsEnqueued.labels(queue, kind),
        wait: this.stepWait.labels(queue, kind),
        duration: this.stepDuration.labels(queue, kind),
        finished: (outcome) => {
          let counter = outcomes.get(outcome);
          if (!counter) outcomes.set(outcome, (counter = this.stepsFinished.labels(queue, kind, outcome)));
          return counter;
        },
      };
      kinds.set(kind, series);
    }
    return series;
  }

  /** The last sample's queues, with zeros for queues reported before and for those this client serves. */
  private sampledQueues() {
    const sampled = this.stats.clusterSample?.queues ?? [];
    for (const q of sampled) this.queues.add(q.queue);
    for (const queue of this.stats.servedQueues.keys()) this.queues.add(queue);
    const byName = new Map(sampled.map((q) => [q.queue, q]));
    return [...this.queues].sort().map(
      (queue) => byName.get(queue) ?? { queue, available: 0, scheduled: 0, running: 0, oldestAvailableMs: 0, paused: false },
    );
  }
}

interface KindSeries {
  enqueued: Counter.Internal;
  wait: Histogram.Internal<'queue' | 'kind'>;
  duration: Histogram.Internal<'queue' | 'kind'>;
  finished(outcome: string): Counter.Internal;
}

function isRegistry(value: unknown): value is Registry {
  // Duck-typed: a registry from another copy of prom-client (the app's own) works as well.
  const r = value as Partial<Registry> | null;
  return typeof r?.registerMetric === 'function' && typeof r.getSingleMetric === 'function' && typeof r.metrics === 'function';
}
