import { Logger } from '@nestjs/common';
import type { CycloneDatabase } from '../database/cyclone-database.js';
import { errorMessage } from '../common/error-message.js';
import { FAIL_DELIVERY, REQUEUE_DISPATCH, START_DISPATCHED } from '../sql/dispatch.sql.js';
import type { ClaimedStep } from '../sql/claim.sql.js';
import type { QueueWorker } from '../worker/queue-worker.js';
import type { DispatchStats } from './dispatch-stats.js';
import type { PendingEntry, RedisCommands, StreamMessage } from './redis-commands.js';
import type { RedisLink } from './redis-link.js';
import { GROUP, parseMessage, queueStreams, type DispatchMessage } from './stream-keys.js';

/** How long one blocking read waits for a message before it looks at its slots again. */
const BLOCK_MS = 5_000;
/** A message for a kind this client does not run goes back to the outbox, due this much later, for another client. */
const FOREIGN_DELAY_MS = 1_000;
/** Backoff between reads while Redis or the database cannot be reached. */
const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 2_000;

export interface ConsumerDeps {
  link: RedisLink;
  database: CycloneDatabase;
  stats: DispatchStats;
  /** This client's name: the consumer in every group, and the lease owner. */
  owner: string;
  shards: number;
  leaseTtlMs: number;
  maxDeliveries: number;
  whenRedisDown: 'claim' | 'wait';
  /** The retry delay of a kind's attempt, for a step failed past maxDeliveries. */
  retryDelayMs(kind: string, attempt: number): number;
  /** The delay before retrying a step whose timeout elapsed under a dead consumer, unless the step stores its own backoff. */
  defaultRetryDelayMs: number;
}

/** A message read from a stream, with its place there. */
interface Delivery {
  stream: string;
  id: string;
  fields: Record<string, string>;
}

/**
 * One queue's reader of its streams, feeding its QueueWorker: a blocking
 * XREADGROUP on a connection of its own, for as many messages as the worker
 * has free slots; the steps they name are started by id in one statement a
 * batch (START_DISPATCHED), and each message is acknowledged and deleted once
 * its step's outcome has committed, or at once when its step is not
 * startable. A message the worker claims for itself (a limited kind, a
 * capped queue, a code workflow) wakes that claim; one for a kind this client
 * does not run goes back to the outbox for the queue's other clients.
 *
 * While a step runs, its message's idle time is reset every leaseTtl/3
 * (XCLAIM to itself, JUSTID, which counts no delivery), so `reclaim` on any
 * client takes only messages whose consumer stopped: never a healthy long
 * step's.
 */
export class StreamConsumer {
  private readonly logger = new Logger('Cyclone');
  private readonly streams: string[];
  /** The message of each step this worker runs, by step id. */
  private readonly inflight = new Map<string, { stream: string; id: string }>();
  private readonly acks = new Map<string, string[]>();
  private ackScheduled = false;
  private reader?: RedisCommands;
  private reading?: Promise<void>;
  private refreshTimer?: NodeJS.Timeout;
  private groupsReady = false;
  private stopped = false;
  private claimingFallback = false;
  private malformedLogged = false;

  constructor(
    private readonly worker: QueueWorker,
    private readonly deps: ConsumerDeps,
  ) {
    this.streams = queueStreams(worker.queue, deps.shards);
    worker.onSettled = (stepId, outcome) => this.settled(stepId, outcome);
  }

  get queue(): string {
    return this.worker.queue;
  }

  start(): void {
    this.reader = this.deps.link.reader();
    this.reading = this.readWhileRunning();
    this.refreshTimer = setInterval(() => void this.refreshInflight(), this.deps.leaseTtlMs / 3);
  }

  /** Stops reading (a blocking read in flight is aborted); messages of running steps are acknowledged as they finish. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.refreshTimer);
    if (this.reader) this.deps.link.closeReader(this.reader);
    await this.reading;
  }

  /** The queue's streams, for the reclaimer and the health check. */
  get streamKeys(): readonly string[] {
    return this.streams;
  }

  /** Creates the consumer group of each stream (and the stream), where missing. */
  async ensureGroups(commands: RedisCommands): Promise<void> {
    for (const stream of this.streams) {
      try {
        await commands.xGroupCreate(stream, GROUP, '0', { MKSTREAM: true });
      } catch (err) {
        if (!/BUSYGROUP/.test(errorMessage(err))) throw err;
      }
    }
    this.groupsReady = true;
  }

  /**
   * Takes over the messages that have been pending longer than `minIdleMs`:
   * their consumer stopped (its process died, or it lost Redis). Each
   * XCLAIM counts a delivery; past maxDeliveries the step fails its attempt
   * with error_kind 'max_deliveries' (seed 004, step 6). The others are
   * handled as if just read (a step whose lease expired is taken over).
   */
  async reclaim(minIdleMs: number): Promise<number> {
    const commands = this.deps.link.commands;
    let taken = 0;
    for (const stream of this.streams) {
      let entries: PendingEntry[];
      try {
        entries = await commands.xPendingRange(stream, GROUP, '-', '+', 100, { IDLE: minIdleMs });
      } catch (err) {
        if (!isNoGroup(err)) throw err;
        // Redis lost the stream: nothing is pending there; the reader makes the group again.
        this.groupsReady = false;
        continue;
      }
      const pending = entries.filter((entry) => !(entry.consumer === this.deps.owner && this.isInflight(entry.id)));
      if (pending.length === 0) continue;
      const deliveries = new Map(pending.map((entry) => [entry.id, entry.deliveriesCounter + 1]));
      const claimed = (await commands.xClaim(stream, GROUP, this.deps.owner, minIdleMs, [...deliveries.keys()])).filter(
        (message): message is StreamMessage => message !== null,
      );
      taken += claimed.length;
      this.deps.stats.count(this.deps.stats.reclaimed, this.queue, claimed.length);
      const fresh: Delivery[] = [];
      for (const message of claimed) {
        const parsed = parseMessage(message.message);
        if (parsed && deliveries.get(message.id)! > this.deps.maxDeliveries) {
          await this.failDelivery(stream, message.id, parsed, deliveries.get(message.id)!);
        } else {
          fresh.push({ stream, id: message.id, fields: message.message });
        }
      }
      await this.handle(fresh);
    }
    return taken;
  }

  private isInflight(messageId: string): boolean {
    for (const entry of this.inflight.values()) if (entry.id === messageId) return true;
    return false;
  }

  private async readWhileRunning(): Promise<void> {
    let retryMs = RETRY_MIN_MS;
    // The last read filled what it asked for: a backlog waits, and reads take some ahead of the free slots.
    let backlog = false;
    while (!this.stopped) {
      const free = this.worker.freeSlots();
      if (free <= 0) {
        await this.worker.slotFreed();
        continue;
      }
      try {
        if (!this.reader!.isReady || !this.deps.link.up) throw new Error('Redis is not connected');
        if (!this.groupsReady) await this.ensureGroups(this.deps.link.commands);
        const wanted: number = free + (backlog ? this.worker.dispatchAhead() : 0);
        const began = performance.now();
        const replies = await this.reader!.xReadGroup(
          GROUP,
          this.deps.owner,
          this.streams.map((key) => ({ key, id: '>' })),
          { COUNT: Math.ceil(wanted / this.streams.length), BLOCK: BLOCK_MS },
        );
        this.setFallback(false);
        retryMs = RETRY_MIN_MS;
        const deliveries = (replies ?? []).flatMap((reply) =>
          reply.messages.map((m) => ({ stream: reply.name, id: m.id, fields: m.message })),
        );
        backlog = deliveries.length >= wanted;
        if (deliveries.length === 0) continue;
        await this.handle(deliveries);
        // A read that found its messages waiting did not block: its time is what a claim's would be.
        if (backlog) this.worker.dispatchTook(performance.now() - began);
      } catch (err) {
        if (this.stopped) break;
        if (isNoGroup(err)) {
          // The stream or its group is gone (Redis lost its data): made again, read again.
          this.groupsReady = false;
          continue;
        }
        // Messages read but not started stay pending and are reclaimed; the
        // outage is logged by the link (Redis) or the database's outage log.
        // Only Redis away turns the claim on: a reader still connecting
        // (the link is up) is waited for.
        if (!this.deps.link.up) this.setFallback(true);
        await new Promise((resolve) => setTimeout(resolve, retryMs));
        retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
      }
    }
  }

  /** Redis away: with whenRedisDown 'claim', the worker claims its plain steps from the database meanwhile. */
  private setFallback(on: boolean): void {
    if (on === this.claimingFallback || this.deps.whenRedisDown !== 'claim') return;
    this.claimingFallback = on;
    this.worker.setClaimFallback(on);
  }

  private async handle(deliveries: Delivery[]): Promise<void> {
    const toStart: { delivery: Delivery; message: DispatchMessage }[] = [];
    const foreign: DispatchMessage[] = [];
    let wake = false;
    for (const delivery of deliveries) {
      const message = parseMessage(delivery.fields);
      if (!message) {
        this.deps.stats.malformed += 1;
        if (!this.malformedLogged) {
          this.malformedLogged = true;
          this.logger.warn(
            `Broker dispatch: dropped a message on ${delivery.stream} that is not Cyclone's (id ${delivery.id}); ` +
              'further ones are counted, not logged',
          );
        }
        this.ack(delivery);
        continue;
      }
      if (message.type !== 'workflow' && this.worker.plainKinds.includes(message.kind)) {
        toStart.push({ delivery, message });
        continue;
      }
      if (this.worker.runsKind(message.kind)) wake = true;
      else foreign.push(message);
      this.ack(delivery);
    }
    if (foreign.length > 0) {
      await this.deps.database.query(REQUEUE_DISPATCH, [foreign.map((m) => m.run), foreign.map((m) => m.step), FOREIGN_DELAY_MS]);
    }
    if (wake) this.worker.wake();
    if (toStart.length === 0) return;
    const runIds = toStart.map((s) => s.message.run);
    const ids = toStart.map((s) => s.message.step);
    const rows = await this.startSteps(runIds, ids);
    const started = new Set(rows.map((row) => row.id));
    for (const { delivery, message } of toStart) {
      // A duplicate message of a step started in this same batch is dropped like any other.
      if (started.has(message.step) && !this.inflight.has(message.step)) {
        this.inflight.set(message.step, { stream: delivery.stream, id: delivery.id });
      } else {
        this.ack(delivery);
      }
    }
    this.worker.startDispatched(rows);
  }

  private async startSteps(runIds: string[], ids: string[]): Promise<ClaimedStep[]> {
    const { owner, leaseTtlMs } = this.deps;
    const kinds = [...this.worker.plainKinds];
    return (await this.deps.database.query(START_DISPATCHED, [runIds, ids, kinds, owner, leaseTtlMs, this.deps.defaultRetryDelayMs]))
      .rows;
  }

  private async failDelivery(stream: string, id: string, message: DispatchMessage, deliveries: number): Promise<void> {
    const error = `Its dispatch message was delivered ${deliveries} times without an outcome; maxDeliveries is ${this.deps.maxDeliveries}`;
    const { rows } = await this.deps.database.query(FAIL_DELIVERY, [
      message.run,
      message.step,
      this.deps.owner,
      error,
      this.deps.retryDelayMs(message.kind, 1),
    ]);
    if (rows[0]?.state != null) {
      this.deps.stats.count(this.deps.stats.maxDeliveries, this.queue);
      this.logger.warn(`Broker dispatch: step ${message.step} of run ${message.run} failed: ${error}`);
    }
    this.ack({ stream, id, fields: {} });
  }

  private settled(stepId: string, outcome: string): void {
    const entry = this.inflight.get(stepId);
    if (!entry) return;
    this.inflight.delete(stepId);
    // Not recorded: the step is still leased here; its message stays pending for the reclaimer.
    if (outcome !== 'unrecorded') this.ack({ ...entry, fields: {} });
  }

  /** Acknowledges and deletes a message, batched with the others of this turn of the event loop. */
  private ack(delivery: Delivery): void {
    const ids = this.acks.get(delivery.stream) ?? [];
    ids.push(delivery.id);
    this.acks.set(delivery.stream, ids);
    if (this.ackScheduled) return;
    this.ackScheduled = true;
    setImmediate(() => void this.flushAcks());
  }

  private async flushAcks(): Promise<void> {
    this.ackScheduled = false;
    const batches = [...this.acks];
    this.acks.clear();
    for (const [stream, ids] of batches) {
      try {
        await this.deps.link.commands.xAck(stream, GROUP, ids);
        await this.deps.link.commands.xDel(stream, ids);
      } catch (err) {
        // Left pending: the reclaimer finds them finished and drops them then.
        this.logger.debug(`Broker dispatch: could not acknowledge ${ids.length} message(s) on ${stream}: ${errorMessage(err)}`);
      }
    }
  }

  /** Resets the idle time of the messages of running steps, so that no reclaimer takes them. */
  private async refreshInflight(): Promise<void> {
    const byStream = new Map<string, string[]>();
    for (const { stream, id } of this.inflight.values()) byStream.set(stream, [...(byStream.get(stream) ?? []), id]);
    for (const [stream, ids] of byStream) {
      try {
        await this.deps.link.commands.xClaimJustId(stream, GROUP, this.deps.owner, 0, ids);
      } catch (err) {
        // Redis away: the link reports it; the lease, renewed in PostgreSQL, still guards the step.
        this.logger.debug(`Broker dispatch: could not refresh ${ids.length} running message(s) on ${stream}: ${errorMessage(err)}`);
      }
    }
  }
}

/** Redis's answer when a stream or its consumer group does not exist. */
export function isNoGroup(err: unknown): boolean {
  return /NOGROUP/.test(errorMessage(err));
}
