import { Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { Loop } from '../common/loop.js';
import { errorMessage } from '../common/error-message.js';
import type { CycloneDatabase } from '../database/cyclone-database.js';
import { execute } from '../database/statement.js';
import { DEFER_OUTBOX, DELETE_OUTBOX, NEXT_OUTBOX_DUE, RETRY_OUTBOX_NOW, TAKE_OUTBOX, type OutboxRow } from '../sql/dispatch.sql.js';
import type { DispatchStats } from './dispatch-stats.js';
import type { RedisLink } from './redis-link.js';
import { streamKey } from './stream-keys.js';

/** Rows a transaction takes: large enough that a backlog goes out in few round trips, small enough to hold few locks. */
const BATCH = 500;

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
 * Woken by the NOTIFY the outbox's trigger sends, by the poll tick as a
 * fallback, and at the due time of the next delayed row. A wake-up during a
 * pass makes it run once more.
 */
export class OutboxPublisher {
  private readonly logger = new Logger('Cyclone');
  readonly loop: Loop;
  private publishing?: Promise<void>;
  private again = false;
  private nextDueMs: number | null = null;
  private refusedLogged = false;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly link: RedisLink,
    private readonly stats: DispatchStats,
    private readonly shards: number,
    pollIntervalMs: [number, number],
    scheduler: SchedulerRegistry,
  ) {
    const [min, max] = pollIntervalMs;
    this.loop = new Loop(
      'cyclone:outbox',
      () => Math.min(min + Math.random() * (max - min), this.nextDueMs ?? Infinity),
      () => this.publish(),
      scheduler,
      (err) => this.database.covers(err),
    );
    link.onChange((up) => {
      if (up) void this.retryNow();
    });
  }

  /** Publishes now, or once more after the pass under way. */
  wake(): void {
    if (this.publishing) {
      this.again = true;
      return;
    }
    this.publishing = this.publish()
      .catch((err: unknown) => {
        if (!this.database.covers(err)) {
          this.logger.warn(`Broker dispatch: publishing the outbox failed: ${errorMessage(err)}`);
        }
      })
      .finally(() => {
        this.publishing = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  /** One pass: batches until the due rows are out. */
  async publish(): Promise<void> {
    while ((await this.publishBatch()) === BATCH);
    const { rows } = await this.database.query(NEXT_OUTBOX_DUE, []);
    this.nextDueMs = rows[0].due_in_ms === null ? null : Math.max(rows[0].due_in_ms, 1);
  }

  /** Waits for a pass under way (at shutdown). */
  async idle(): Promise<void> {
    await this.publishing;
  }

  private publishBatch(): Promise<number> {
    return this.database.transaction(async (client) => {
      const { rows } = await execute(client, TAKE_OUTBOX, [BATCH, this.shards]);
      if (rows.length === 0) return 0;
      try {
        await Promise.all(rows.map((row) => this.link.commands.xAdd(streamKey(row.queue, row.shard), '*', fields(row))));
      } catch (err) {
        await execute(client, DEFER_OUTBOX, [rows.map((row) => row.id)]);
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
