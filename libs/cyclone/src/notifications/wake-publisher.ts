import { Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { WAKE_QUEUES } from '../sql/enqueue.sql.js';
import { WAKE_CHANNEL } from '../sql/names.js';
import { NotificationListener } from './notification-listener.js';

/**
 * Publishes queue wake-ups after enqueues commit, coalesced: while one NOTIFY
 * is on its way, the queues woken meanwhile wait and go out together in the
 * next. A transaction that sent NOTIFY holds the server-wide notification
 * queue lock through its commit, so a NOTIFY inside every enqueue's own
 * commit would serialise concurrent enqueues on that lock. Best effort: a
 * wake-up that fails is logged, and workers find the job at their next poll.
 * This app's own workers are woken at once, without the round trip; the
 * NOTIFY for the other replicas goes over the LISTEN connection, which skips
 * its echo (an empty claim per enqueue otherwise), or over the pool while
 * that connection is down.
 */
@Injectable()
export class WakePublisher implements BeforeApplicationShutdown {
  private readonly logger = new Logger('Cyclone');
  private readonly pending = new Set<string>();
  private publishing?: Promise<void>;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly listener: NotificationListener,
  ) {}

  wake(queue: string): void {
    this.listener.deliver(WAKE_CHANNEL, queue);
    this.pending.add(queue);
    this.publishing ??= this.publish().finally(() => {
      this.publishing = undefined;
    });
  }

  /** Lets a wake-up in flight go out before the pool closes. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.publishing;
  }

  private async publish(): Promise<void> {
    while (this.pending.size > 0) {
      const queues = [...this.pending];
      this.pending.clear();
      try {
        if (!(await this.listener.publishWakes(queues))) await this.database.query(WAKE_QUEUES, [queues]);
      } catch (err) {
        if (this.database.covers(err)) continue;
        this.logger.warn(
          `Could not wake queue(s) ${queues.join(', ')}: ${(err as Error).message}; workers will find the jobs at their next poll`,
        );
      }
    }
  }
}
