import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { CYCLONE_OPTIONS, CYCLONE_SCHEDULER, DEFAULT_WORKERS, WAKE_CHANNEL } from '../cyclone.constants.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { Loop } from '../maintenance/loop.js';
import { RecoverySweeper } from '../maintenance/recovery.sweeper.js';
import { RetentionSweeper } from '../maintenance/retention.sweeper.js';
import type { ResolvedOptions } from '../module/resolved-options.js';
import { HAND_BACK } from '../sql/lease.sql.js';
import { StepRegistry } from '../steps/step-registry.js';
import { NotificationListener } from './notification-listener.js';
import { QueueWorker } from './queue-worker.js';
import { WorkerStats } from './worker-stats.js';
import { CompletionBatcher } from './completion-batcher.js';
import { TimerSweeper } from '../maintenance/timer.sweeper.js';

/** Apps whose workers are already running: a second import of the module must not start more. */
const startedApps = new WeakSet<ModulesContainer>();

/**
 * Runs this client's workers (one QueueWorker per served queue, woken by
 * NOTIFY and by the poll loop) and its maintenance loops: the poll tick with
 * the recovery sweep, timers, and retention. Starts after every module has
 * initialised (so discovery is done) and drains in `onModuleDestroy`, while
 * the database is still open.
 */
@Injectable()
export class WorkerHost implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Cyclone');
  readonly owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  readonly stats = new WorkerStats();
  readonly workers = new Map<string, QueueWorker>();
  readonly pollLoop: Loop;
  private readonly completions: CompletionBatcher;
  private unsubscribe: (() => void)[] = [];
  private active = false;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly registry: StepRegistry,
    private readonly listener: NotificationListener,
    private readonly modules: ModulesContainer,
    private readonly recovery: RecoverySweeper,
    private readonly retention: RetentionSweeper,
    private readonly timers: TimerSweeper,
    @Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(CYCLONE_SCHEDULER) scheduler: SchedulerRegistry,
  ) {
    this.completions = new CompletionBatcher(database, this.owner);
    const [min, max] = options.pollIntervalMs;
    this.pollLoop = new Loop('cyclone:poll', () => min + Math.random() * (max - min), () => this.poll(), scheduler);
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.listener.start();
    if (startedApps.has(this.modules)) {
      this.logger.warn('CycloneModule is imported more than once; workers and sweeps run for the first import only.');
      return;
    }
    startedApps.add(this.modules);
    this.active = true;
    // Every client sweeps, enqueue-only ones too: recovery needs no leader.
    if (this.options.runWorkers) this.startWorkers();
    this.pollLoop.start(0);
    this.timers.loop.start();
    this.retention.loop.start();
  }

  private startWorkers(): void {
    for (const [queue, slots] of this.servedQueues()) {
      this.workers.set(
        queue,
        new QueueWorker(queue, slots, this.registry, {
          database: this.database,
          owner: this.owner,
          leaseTtlMs: this.options.leaseTtlMs,
          maxPayloadBytes: this.options.maxPayloadBytes,
          stats: this.stats,
          completions: this.completions,
        }),
      );
    }
    this.unsubscribe.push(
      this.listener.on(WAKE_CHANNEL, (queue) => this.workers.get(queue)?.wake()),
      this.listener.onReconnect(() => this.wakeAll()),
    );
    this.logger.log(
      `Workers started as ${this.owner}: ` +
        [...this.workers.values()].map((w) => `${w.queue}×${w.slots}`).join(', '),
    );
  }

  /**
   * Graceful shutdown: stop claiming, give running handlers `shutdownTimeout`
   * to finish, then abort the rest and hand their steps back, available at
   * once with nothing counted against them.
   */
  async onModuleDestroy(): Promise<void> {
    for (const fn of this.unsubscribe) fn();
    if (this.active) {
      startedApps.delete(this.modules);
      await Promise.all([this.pollLoop.stop(), this.timers.loop.stop(), this.retention.loop.stop()]);
      await Promise.all([...this.workers.values()].map((w) => w.stop()));
      await this.drain();
    }
    await this.listener.stop();
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
    const { rows } = await this.database.query(HAND_BACK, [
      left.map((e) => e.row.id),
      this.owner,
      left.map((e) => e.row.lease_generation),
    ]);
    this.logger.warn(`Shutdown: handed back ${rows[0].handed} step(s) that did not finish in time`);
  }

  wakeAll(): void {
    for (const worker of this.workers.values()) worker.wake();
  }

  /** The poll tick: the fallback for lost wake-ups, then the recovery sweep. */
  private async poll(): Promise<void> {
    this.wakeAll();
    await this.recovery.sweep();
  }

  /**
   * The configured queues, plus, when none were configured, any queue a
   * registered step names, so that `@Step('x', { queue: 'bulk' })` runs
   * without further setup.
   */
  private servedQueues(): Map<string, number> {
    const queues = new Map(this.options.queues);
    for (const step of this.registry.all()) {
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
