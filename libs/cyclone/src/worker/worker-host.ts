import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { CYCLONE_OPTIONS, CYCLONE_SCHEDULER, DEFAULT_QUEUE, DEFAULT_WORKERS } from '../cyclone.constants.js';
import { messages } from '../cyclone.messages.js';
import { Loop } from '../common/loop.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { sqlStateOf } from '../database/database-fault.js';
import { isEmbeddedSignalFallback } from '../database/embedded-database.js';
import { CycloneInstance } from '../runtime/cyclone-instance.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import { NotificationListener } from '../notifications/notification-listener.js';
import { handBack } from './hand-back.js';
import { IDLE_CHANNEL, WAKE_CHANNEL } from '../sql/names.js';
import { REGISTER_QUEUES } from '../sql/queues.sql.js';
import { ENQUEUE_AND_START, ENQUEUE_JOBS } from '../sql/enqueue.sql.js';
import { COMPLETE_STEPS } from '../sql/complete.sql.js';
import { enqueueJobsValues } from '../steps/job-params.js';
import { warmConnections, type WarmCall } from '../database/connection-warmer.js';
import { execute } from '../database/statement.js';
import { CycloneStats } from '../runtime/cyclone-stats.js';
import { StepRegistry } from '../steps/step-registry.js';
import { WorkflowRegistry } from '../workflow/workflow-registry.js';
import { CycloneTracer } from '../tracing/cyclone-tracer.js';
import { CompletionBatcher } from './completion-batcher.js';
import { QueueWorker } from './queue-worker.js';
import { CodeWorkflowRegistry } from '../workflow/code/code-workflow-registry.js';
import { DispatchService } from '../dispatch/dispatch.service.js';
import type { StreamConsumer } from '../dispatch/stream-consumer.js';
import { LocalWorkers } from './local-workers.js';

/** SQLSTATE of a table that does not exist. */
const UNDEFINED_TABLE = '42P01';

/** How long after startup the app is checked for shutdown hooks: `enableShutdownHooks()` may come after `init()`. */
const SHUTDOWN_HOOK_CHECK_MS = 2_000;

/**
 * Runs this client's workers: one QueueWorker per served queue, woken by
 * NOTIFY and by the poll loop (the fallback for lost wake-ups); with broker
 * dispatch on, each also fed by a StreamConsumer of its queue's streams. Starts after
 * every module has initialised (so discovery is done) and drains in
 * `onModuleDestroy`, while the database is still open.
 */
@Injectable()
export class WorkerHost implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Cyclone');
  private readonly workers = new Map<string, QueueWorker>();
  private readonly consumers: StreamConsumer[] = [];
  private readonly pollLoop: Loop;
  private readonly completions: CompletionBatcher;
  private unsubscribe: (() => void)[] = [];
  private hookCheck?: NodeJS.Timeout;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly registry: StepRegistry,
    private readonly listener: NotificationListener,
    private readonly instance: CycloneInstance,
    private readonly stats: CycloneStats,
    @Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(CYCLONE_SCHEDULER) scheduler: SchedulerRegistry,
    private readonly tracer: CycloneTracer,
    private readonly workflows: WorkflowRegistry,
    private readonly codeWorkflows: CodeWorkflowRegistry,
    private readonly dispatch: DispatchService,
    private readonly local: LocalWorkers,
  ) {
    this.completions = new CompletionBatcher(database, stats.clientId);
    const [min, max] = options.pollIntervalMs;
    this.pollLoop = new Loop('cyclone:poll', () => min + Math.random() * (max - min), async () => this.wakeAll(), scheduler);
    stats.running = () => [...this.workers.values()].reduce((n, w) => n + w.running.size, 0);
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.instance.isPrimary) return;
    const served = this.options.runWorkers ? this.servedQueues() : new Map<string, number>();
    await this.registerQueues(served);
    await warmConnections(this.database, this.warmCalls(served), this.logger);
    if (!this.options.runWorkers) return;
    await this.dispatch.started();
    for (const [queue, slots] of served) {
      const worker = new QueueWorker(
        queue,
        slots,
        this.registry,
        {
          database: this.database,
          queue,
          owner: this.stats.clientId,
          leaseTtlMs: this.options.leaseTtlMs,
          maxPayloadBytes: this.options.maxPayloadBytes,
          stats: this.stats,
          completions: this.completions,
          tracer: this.tracer,
        },
        this.options.queueCaps.get(queue) ?? null,
        this.codeWorkflows.onQueue(queue),
        this.dispatch.enabled,
      );
      this.workers.set(queue, worker);
      this.local.register(worker);
      if (this.dispatch.enabled) this.consumers.push(this.dispatch.consumerFor(worker));
    }
    this.unsubscribe.push(
      this.listener.on(WAKE_CHANNEL, (queue) => this.workers.get(queue)?.wake()),
      this.listener.on(IDLE_CHANNEL, (queue) => this.workers.get(queue)?.lendAhead()),
      this.listener.onReconnect(() => void this.wakeAll()),
    );
    this.stats.servedQueues = new Map([...this.workers.values()].map((w) => [w.queue, w.slots]));
    this.stats.workflowVersions = new Map(
      this.codeWorkflows
        .all()
        .filter((w) => this.workers.has(w.step.queue ?? DEFAULT_QUEUE))
        .map((w) => [w.name, w.version]),
    );
    this.stats.track(this.pollLoop);
    this.pollLoop.start(0);
    for (const consumer of this.consumers) consumer.start();
    this.logger.log(
      `Workers started as ${this.stats.clientId}: ` +
        [...this.workers.values()].map((w) => `${w.queue}×${w.slots}`).join(', '),
    );
    this.hookCheck = setTimeout(() => this.checkShutdownHooks(), SHUTDOWN_HOOK_CHECK_MS).unref();
  }

  /**
   * Graceful shutdown: stop claiming, give running handlers `shutdownTimeout`
   * to finish, then abort the rest and hand their steps back, available at
   * once with nothing counted against them.
   */
  async onModuleDestroy(): Promise<void> {
    clearTimeout(this.hookCheck);
    for (const fn of this.unsubscribe) fn();
    this.unsubscribe = [];
    this.local.clear();
    await Promise.all(this.consumers.map((c) => c.stop()));
    await this.pollLoop.stop();
    await Promise.all([...this.workers.values()].map((w) => w.stop()));
    await this.drain();
    this.instance.release();
  }

  private async drain(): Promise<void> {
    const running = () => [...this.workers.values()].flatMap((w) => [...w.running.values()]);
    const all = running();
    if (all.length === 0) return;
    this.logger.log(`Waiting up to ${this.options.shutdownTimeoutMs} ms for ${all.length} running step(s)`);
    const drained = Promise.all(all.map((e) => e.finished));
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.options.shutdownTimeoutMs)));
    await Promise.race([drained, timedOut]);
    clearTimeout(timer);
    const left = running();
    if (left.length === 0) return;
    for (const execution of left) {
      execution.handedBack = true;
      execution.abort('shutdown');
    }
    const handed = await handBack(this.database, this.stats.clientId, left.map((e) => e.row));
    this.logger.warn(`Shutdown: handed back ${handed} step(s) that did not finish in time`);
  }

  /**
   * Records that the queues this client serves, and those its steps and
   * workflows name, exist: pauseQueue, on any client, refuses any other. A
   * schema older than version 11 has no table for them (migrationsRun:
   * false, or a rolling upgrade whose migration has not run yet): there is
   * nothing to record then, and pauseQueue needs that version too.
   */
  private async registerQueues(served: Map<string, number>): Promise<void> {
    const named = [...this.registry.all(), ...this.codeWorkflows.all().map((w) => w.step)].map((step) => step.queue ?? DEFAULT_QUEUE);
    const nodes = this.workflows.names().flatMap((name) => this.workflows.get(name).nodes.map((node) => node.queue));
    try {
      await this.database.query(REGISTER_QUEUES, [[...new Set([...served.keys(), ...named, ...nodes])]]);
    } catch (err) {
      if (sqlStateOf(err) !== UNDEFINED_TABLE) throw err;
    }
  }

  /**
   * What this client's first jobs run: with workers, the enqueue that starts
   * jobs in them and the completion; without, the plain enqueue.
   */
  private warmCalls(served: Map<string, number>): WarmCall[] {
    const [queue] = served.keys();
    if (queue === undefined) return [(client) => execute(client, ENQUEUE_JOBS, enqueueJobsValues([]))];
    const owner = this.stats.clientId;
    return [
      (client) =>
        execute(client, ENQUEUE_AND_START, [...enqueueJobsValues([]), queue, [], 0, owner, this.options.leaseTtlMs, [], []]),
      (client) => execute(client, COMPLETE_STEPS, [[], [], owner, [], []]),
    ];
  }

  private async wakeAll(): Promise<void> {
    await Promise.all([...this.workers.values()].map((worker) => worker.poll()));
  }

  /**
   * Without shutdown hooks a SIGTERM ends the process at once: its running
   * steps stay claimed until their lease expires. Nest offers no way to ask
   * whether hooks are enabled, so this looks for anyone listening for SIGTERM.
   */
  private checkShutdownHooks(): void {
    const listeners = process.listeners('SIGTERM').filter((fn) => !isEmbeddedSignalFallback(fn));
    if (listeners.length === 0 && this.workers.size > 0) this.logger.warn(messages.noShutdownHooks());
  }

  /**
   * The configured queues, plus, when none were configured, any queue a
   * registered step or workflow names, so that `@Step('x', { queue: 'bulk' })`
   * runs without further setup.
   */
  private servedQueues(): Map<string, number> {
    const queues = new Map(this.options.queues);
    for (const step of [...this.registry.all(), ...this.codeWorkflows.all().map((w) => w.step)]) {
      if (!step.queue || queues.has(step.queue)) continue;
      if (this.options.queuesConfigured) {
        this.logger.warn(
          `Step "${step.kind}" runs on queue "${step.queue}", which this client does not serve; ` +
            `add it to the queues option for its jobs to run here.`,
        );
      } else {
        queues.set(step.queue, DEFAULT_WORKERS);
      }
    }
    return queues;
  }
}
