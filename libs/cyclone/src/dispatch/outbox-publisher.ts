import { Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { Loop } from '../common/loop.js';
import { errorMessage } from '../common/error-message.js';
import type { CycloneDatabase } from '../database/cyclone-database.js';
import { execute } from '../database/statement.js';
import { DEFER_OUTBOX, DELETE_OUTBOX, OUTBOX_STATE, RETRY_OUTBOX_NOW, TAKE_OUTBOX, type OutboxRow } from '../sql/dispatch.sql.js';
import type { NotificationListener } from '../notifications/notification-listener.js';
import { quietDelay } from './dispatch-timing.js';
import type { DispatchStats } from './dispatch-stats.js';
import type { RedisLink } from './redis-link.js';
import { streamKey } from './stream-keys.js';

/** Rows a transaction takes: large enough that a backlog goes out in few round trips, small enough to hold few locks. */
const BATCH = 500;
/** A batch Redis refused although the link is up (it came back meanwhile, or refuses writes): tried again after this. */
const RETRY_SOON_MS = 250;

/**
 * The outbox's publisher (seed 004): in a transaction, takes due rows with
 * FOR UPDATE SKIP LOCKED, highest priority first, adds each to its queue's
 * stream (the XADDs pipelined), deletes them and commits. Publishers of many
 * clients share the outbox without waiting on each other. A crash between
 * the XADDs and the commit leaves the rows to be published again: the
 * duplicate message is dropped by the start's compare-and-set. Redis
 * refusing: the rows are deferred with a backoff (DEFER_OUTBOX), and taken at
 * once when Redis is back.
 *
 * Woken by the NOTIFY the outbox's trigger sends (and when its LISTEN
 * connection comes back, since wake-ups were lost meanwhile), and at the due
 * time of the next delayed or deferred row; otherwise it looks every few
 * seconds (quietDelay), or at the poll interval while that connection is
 * down. A look that finds nothing due is one statement, so an idle client
 * sends the database next to nothing. A wake-up during a pass makes it run
 * once more.
 */
export class OutboxPublisher {
  private readonly logger = new Logger('Cyclone');
  readonly loop: Loop;
  private nextDueMs: number | null = null;
  private refusedLogged = false;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly link: RedisLink,
    private readonly stats: DispatchStats,
    private readonly shards: number,
    pollIntervalMs: [number, number],
    scheduler: SchedulerRegistry,
    listener: NotificationListener,
  ) {
    const [min, max] = pollIntervalMs;
    const poll = () => min + Math.random() * (max - min);
    this.loop = new Loop(
      'cyclone:outbox',
      () => quietDelay(listener, poll, this.nextDueMs),
      () => this.look(),
      scheduler,
      (err) => this.database.covers(err),
    );
    link.onChange((up) => {
      if (up) void this.retryNow();
    });
  }

  /** Publishes now, or once more right after the pass under way. */
  wake(): void {
    this.loop.trigger();
  }

  /**
   * One pass: reads whether rows are due and when the next will be, and
   * publishes the due ones, batch after batch; then reads again, for the
   * loop's next wait.
   */
  private async look(): Promise<void> {
    const { rows } = await this.database.query(OUTBOX_STATE, []);
    this.nextDueMs = rows[0].next_due_ms;
    if (!rows[0].due) return;
    while ((await this.publishBatch()) === BATCH);
    this.nextDueMs = (await this.database.query(OUTBOX_STATE, [])).rows[0].next_due_ms;
  }

  private publishBatch(): Promise<number> {
    return this.database.transaction(async (client) => {
      const { rows } = await execute(client, TAKE_OUTBOX, [BATCH, this.shards]);
      if (rows.length === 0) return 0;
      try {
        await Promise.all(rows.map((row) => this.link.commands.xAdd(streamKey(row.queue, row.shard), '*', fields(row))));
      } catch (err) {
        await execute(client, DEFER_OUTBOX, [rows.map((row) => row.id)]);
        // Redis came back while this batch was on its way (its return already reset the backoffs): again, shortly.
        if (this.link.up) setTimeout(() => void this.retryNow(), RETRY_SOON_MS).unref();
        if (!this.refusedLogged) {
          this.refusedLogged = true;
          this.logger.warn(`Broker dispatch: Redis refused ${rows.length} message(s) (${errorMessage(err)}); they wait in the outbox`);
        }
        // Committed with the deferral; the pass ends here.
        return -1;
      }
      await execute(client, DELETE_OUTBOX, [rows.map((row) => row.id)]);
      this.refusedLogged = false;
      for (const row of rows) this.stats.count(this.stats.published, row.queue);
      return rows.length;
    });
  }

  private async retryNow(): Promise<void> {
    try {
      await this.database.query(RETRY_OUTBOX_NOW, []);
      this.wake();
    } catch (err) {
      if (!this.database.covers(err)) this.logger.warn(`Broker dispatch: could not resume the outbox: ${errorMessage(err)}`);
    }
  }
}

function fields(row: OutboxRow): Record<string, string> {
  return { step: row.step_id, run: row.run_id, kind: row.kind ?? '', type: row.node_type };
}
