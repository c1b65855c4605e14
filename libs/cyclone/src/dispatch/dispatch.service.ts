import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { randomUUID } from 'node:crypto';
import { CYCLONE_OPTIONS, CYCLONE_SCHEDULER } from '../cyclone.constants.js';
import { Loop } from '../common/loop.js';
import { errorMessage } from '../common/error-message.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import type { ResolvedDispatch, ResolvedOptions } from '../options/resolved-options.js';
import { NotificationListener } from '../notifications/notification-listener.js';
import { CycloneInstance } from '../runtime/cyclone-instance.js';
import { CycloneStats } from '../runtime/cyclone-stats.js';
import { OUTBOX_CHANNEL, WAKE_CHANNEL } from '../sql/names.js';
import { ACTIVATE_DISPATCH, ADVANCE_EPOCH, READ_EPOCH, REDISPATCH } from '../sql/dispatch.sql.js';
import { StepRegistry } from '../steps/step-registry.js';
import { retryDelay } from '../steps/retry-policy.js';
import type { QueueWorker } from '../worker/queue-worker.js';
import { DispatchStats, type RedispatchReason } from './dispatch-stats.js';
import { dispatchTickMs, reclaimIdleMs } from './dispatch-timing.js';
import { OutboxPublisher } from './outbox-publisher.js';
import { RedisLink } from './redis-link.js';
import { isNoGroup, StreamConsumer } from './stream-consumer.js';
import { EPOCH_KEY, GROUP, SHARDS_KEY } from './stream-keys.js';

/** How far ahead a client with dispatch on keeps it on for the database, and how often it renews that. */
const ACTIVE_FOR_MS = 60_000;
const RENEW_ACTIVE_MS = 20_000;
/** The lost-dispatch sweep runs at most this often (and at least every lostDispatchAfter). */
const LOST_SWEEP_MAX_MS = 60_000;

/**
 * Broker dispatch (SPEC §17, seed 004), when the `dispatch` option is set:
 * the Redis link, the outbox publisher, the queues' stream consumers (made
 * for the WorkerHost) and the dispatch loop, which on every client takes over
 * messages of stopped consumers (failing those past maxDeliveries), notices
 * a Redis that lost its data (the epoch) and re-dispatches every available
 * step then, re-dispatches steps whose message was lost, and keeps dispatch
 * on for the database. Every statement is safe on many replicas at once.
 *
 * Startup (seed 004, step 1): Redis, the shard count in Redis, one recovery
 * pass, then the publisher. The workers wait for `started()`.
 */
@Injectable()
export class DispatchService implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown {
  private readonly logger = new Logger('Cyclone');
  private readonly config: ResolvedDispatch | null;
  private readonly link?: RedisLink;
  private readonly publisher?: OutboxPublisher;
  private readonly loop?: Loop;
  readonly stats?: DispatchStats;
  private readonly consumers: StreamConsumer[] = [];
  private ready: Promise<void> = Promise.resolve();
  private knownEpoch: string | null = null;
  private lastActivatedAt = 0;
  private lastLostSweepAt = 0;
  private unsubscribe: (() => void)[] = [];
  private running = false;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly listener: NotificationListener,
    private readonly instance: CycloneInstance,
    private readonly registry: StepRegistry,
    private readonly cycloneStats: CycloneStats,
    @Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(CYCLONE_SCHEDULER) scheduler: SchedulerRegistry,
  ) {
    this.config = options.dispatch;
    if (!this.config) return;
    this.link = new RedisLink(this.config);
    this.stats = new DispatchStats();
    this.stats.redisUp = () => this.link!.up;
    this.stats.pending = () => this.pending();
    cycloneStats.dispatch = this.stats;
    this.publisher = new OutboxPublisher(database, this.link, this.stats, this.config.shards, options.pollIntervalMs, scheduler, listener);
    const tick = dispatchTickMs(options);
    this.loop = new Loop('cyclone:dispatch', () => tick * (0.75 + Math.random() / 2), () => this.tick(), scheduler, (err) =>
      database.covers(err),
    );
  }

  get enabled(): boolean {
    return this.config !== null;
  }

  /** Settles once dispatch has started (at once when it is off); the workers wait for it. */
  started(): Promise<void> {
    return this.ready;
  }

  /**
   * Connects to Redis before any loop or connection of the app starts, so
   * that with whenRedisDown 'wait' an unreachable Redis fails the start
   * with nothing left running.
   */
  async onModuleInit(): Promise<void> {
    if (!this.config || !this.instance.isPrimary) return;
    try {
      await this.link!.connect();
    } catch (err) {
      if (this.config.whenRedisDown === 'wait') {
        this.link!.close();
        throw err;
      }
      this.logger.warn(
        `${errorMessage(err)} Broker dispatch starts degraded: workers claim from PostgreSQL until Redis answers ` +
          "(whenRedisDown: 'claim'); the outbox keeps every dispatch meanwhile.",
      );
    }
  }

  onApplicationBootstrap(): Promise<void> {
    if (!this.config || !this.instance.isPrimary) return Promise.resolve();
    this.ready = this.start(this.config);
    return this.ready;
  }

  /** The consumer of a queue's streams, for a worker of this client. */
  consumerFor(worker: QueueWorker): StreamConsumer {
    const config = this.config!;
    const consumer = new StreamConsumer(worker, {
      link: this.link!,
      database: this.database,
      stats: this.stats!,
      owner: this.cycloneStats.clientId,
      shards: config.shards,
      leaseTtlMs: this.options.leaseTtlMs,
      maxDeliveries: config.maxDeliveries,
      whenRedisDown: config.whenRedisDown,
      retryDelayMs: (kind, attempt) => retryDelay(this.registry.find(kind), attempt, this.logger),
      defaultRetryDelayMs: retryDelay(undefined, 1, this.logger),
    });
    this.consumers.push(consumer);
    return consumer;
  }

  async onModuleDestroy(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    for (const fn of this.unsubscribe) fn();
    await Promise.all([this.loop!.stop(), this.publisher!.loop.stop()]);
  }

  onApplicationShutdown(): void {
    this.link?.close();
  }

  private async start(config: ResolvedDispatch): Promise<void> {
    const link = this.link!;
    const { rows } = await this.database.query(ACTIVATE_DISPATCH, [config.shards, ACTIVE_FOR_MS]);
    this.lastActivatedAt = Date.now();
    if (link.up) {
      await link.commands.set(SHARDS_KEY, String(config.shards));
      await this.checkEpoch(!rows[0].was_active);
    } else if (!rows[0].was_active) {
      // Steps made available while no client had dispatch on have no outbox row.
      await this.redispatch(null, 'epoch');
    }
    await this.redispatch(config.lostDispatchAfterMs, 'lost');
    this.lastLostSweepAt = Date.now();
    this.running = true;
    this.unsubscribe.push(
      // Every path that makes a step due now sends its queue's wake-up (in process too, for this client's
      // own enqueues); only rows due later notify on the outbox's channel (dispatch-step.sql).
      this.listener.on(WAKE_CHANNEL, () => this.publisher!.wake()),
      this.listener.on(OUTBOX_CHANNEL, () => this.publisher!.wake()),
      this.listener.onReconnect(() => this.publisher!.wake()),
      link.onChange((up) => {
        if (up) this.loop!.trigger();
      }),
    );
    this.cycloneStats.track(this.publisher!.loop);
    this.cycloneStats.track(this.loop!);
    this.publisher!.loop.start(0);
    this.loop!.start();
    this.logger.log(
      `Broker dispatch on: Redis at ${link.description}, ${config.shards} shard(s) a queue` + (link.up ? '' : ' (not reachable yet)'),
    );
  }

  /** One pass of the dispatch loop. */
  private async tick(): Promise<void> {
    const config = this.config!;
    if (Date.now() - this.lastActivatedAt >= RENEW_ACTIVE_MS) {
      await this.database.query(ACTIVATE_DISPATCH, [config.shards, ACTIVE_FOR_MS]);
      this.lastActivatedAt = Date.now();
    }
    if (Date.now() - this.lastLostSweepAt >= Math.min(config.lostDispatchAfterMs, LOST_SWEEP_MAX_MS)) {
      await this.redispatch(config.lostDispatchAfterMs, 'lost');
      this.lastLostSweepAt = Date.now();
    }
    if (!this.link!.up) return;
    await this.checkEpoch(false);
    for (const consumer of this.consumers) await consumer.reclaim(reclaimIdleMs(this.options));
  }

  /**
   * Redis lost its data when Cyclone's epoch key is gone (a restart without
   * persistence, a flush): its streams, groups and pending messages with it.
   * One client (a compare-and-set on the recorded epoch) writes a new epoch
   * and re-dispatches every available step at once; the consumers make
   * their groups again when a read says they are missing.
   */
  private async checkEpoch(force: boolean): Promise<void> {
    const commands = this.link!.commands;
    const inRedis = await commands.get(EPOCH_KEY);
    if (!force && inRedis !== null && inRedis === this.knownEpoch) return;
    const recorded = (await this.database.query(READ_EPOCH, [])).rows[0]?.epoch ?? null;
    if (!force && inRedis !== null && inRedis === recorded) {
      this.knownEpoch = recorded;
      return;
    }
    const next = randomUUID();
    const { rows } = await this.database.query(ADVANCE_EPOCH, [recorded, next]);
    if (rows.length === 0) return;
    await commands.set(EPOCH_KEY, next);
    await commands.set(SHARDS_KEY, String(this.config!.shards));
    this.knownEpoch = next;
    const count = await this.redispatch(null, 'epoch');
    if (recorded !== null && inRedis !== recorded) {
      this.logger.warn(`Broker dispatch: Redis at ${this.link!.description} lost its data; re-dispatched ${count} available step(s)`);
    }
  }

  private async redispatch(olderThanMs: number | null, reason: RedispatchReason): Promise<number> {
    const { rows } = await this.database.query(REDISPATCH, [olderThanMs, null]);
    const count = rows[0].count;
    this.stats!.count(this.stats!.redispatched, reason, count);
    if (count > 0 && reason === 'lost') {
      this.logger.warn(`Broker dispatch: re-dispatched ${count} step(s) available for over ${olderThanMs} ms with no dispatch pending`);
    }
    return count;
  }

  /** Pending messages of this client's queues, and the oldest one's idle time. */
  private async pending(): Promise<{ count: number; oldestIdleMs: number | null }> {
    let count = 0;
    let oldestIdleMs: number | null = null;
    if (!this.link?.up) return { count, oldestIdleMs };
    for (const consumer of this.consumers) {
      for (const stream of consumer.streamKeys) {
        const entries = await this.link.commands.xPendingRange(stream, GROUP, '-', '+', 1_000).catch((err: unknown) => {
          if (isNoGroup(err)) return [];
          throw err;
        });
        count += entries.length;
        for (const entry of entries) oldestIdleMs = Math.max(oldestIdleMs ?? 0, entry.millisecondsSinceLastDelivery);
      }
    }
    return { count, oldestIdleMs };
  }
}
