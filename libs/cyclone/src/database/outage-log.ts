import type { Logger } from '@nestjs/common';
import { messages } from '../cyclone.messages.js';

/** While the database stays away, how often the log says so again. */
export const OUTAGE_REPORT_EVERY_MS = 60_000;

/**
 * One account of a database outage in the log, instead of a warning from
 * every claim, loop and heartbeat that meets it (several a second): a line
 * when the first call fails to reach the server, one a minute while it
 * stays away (with how many calls failed meanwhile), and one when a call
 * gets through again. Callers that meet the outage stay quiet while
 * `covers` says it is logged here.
 */
export class OutageLog {
  private since: number | null = null;
  private reportedAt = 0;
  private failures = 0;

  constructor(
    private readonly where: string,
    private readonly logger: Logger,
    private readonly reportEveryMs = OUTAGE_REPORT_EVERY_MS,
  ) {}

  /** Whether an outage is going on (and was logged). */
  get isDown(): boolean {
    return this.since !== null;
  }

  /** A call could not reach the server, or lost its connection. */
  failed(reason: string): void {
    const now = Date.now();
    this.failures += 1;
    if (this.since === null) {
      this.since = now;
      this.reportedAt = now;
      this.failures = 0;
      this.logger.warn(messages.databaseDown(this.where, reason));
    } else if (now - this.reportedAt >= this.reportEveryMs) {
      this.logger.warn(messages.databaseStillDown(this.where, now - this.since, this.failures, reason));
      this.reportedAt = now;
      this.failures = 0;
    }
  }

  /**
   * A call that began at `began` (`Date.now()`) got through: an outage that
   * began before it is over. A call already under way when the outage began
   * (a statement that finished as the server went) says nothing of it.
   */
  succeeded(began = Date.now()): void {
    if (this.since === null || began <= this.since) return;
    this.logger.log(messages.databaseBack(this.where, Date.now() - this.since));
    this.since = null;
  }
}
