import type { Logger } from '@nestjs/common';
import type { CycloneDatabase } from '../database/cyclone-database.js';
import { REPORT_PROGRESS } from '../sql/lease.sql.js';
import type { ClaimedStep } from '../sql/claim.sql.js';

/**
 * Writes one attempt's `ctx.progress()` values, at most one write a
 * heartbeat interval: the first report goes out at once, later ones wait
 * for the interval and only the latest of them is written. A handler that
 * reports in a tight loop costs the database no more than its heartbeat.
 * Each write is fenced on the lease; once one matches nothing the step is no
 * longer this attempt's, and nothing more is written. A value still waiting
 * when the attempt ends is dropped: the outcome says the rest.
 */
export class ProgressReporter {
  private pending?: string;
  private lastWriteAt = -Infinity;
  private timer?: NodeJS.Timeout;
  private writing = false;
  private stopped = false;

  constructor(
    private readonly step: ClaimedStep,
    private readonly database: CycloneDatabase,
    private readonly owner: string,
    private readonly intervalMs: number,
    private readonly logger: Logger,
  ) {}

  /** Takes a value already checked and serialised. */
  report(json: string): void {
    if (this.stopped) return;
    this.pending = json;
    if (this.timer || this.writing) return;
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.pending = undefined;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    const wait = this.lastWriteAt + this.intervalMs - Date.now();
    if (wait <= 0) void this.write();
    else this.timer = setTimeout(() => void this.write(), wait);
  }

  private async write(): Promise<void> {
    this.timer = undefined;
    const json = this.pending;
    if (this.stopped || json === undefined) return;
    this.pending = undefined;
    this.writing = true;
    this.lastWriteAt = Date.now();
    try {
      const { rowCount } = await this.database.query(REPORT_PROGRESS, [
        this.step.run_id,
        this.step.id,
        this.owner,
        this.step.lease_generation,
        json,
      ]);
      if (rowCount === 0) this.stop();
    } catch (err) {
      // Progress is informative: a failed write is reported, and the next value is tried in its turn.
      this.logger.warn(
        `Could not store the progress of step ${this.step.node_id} (run ${this.step.run_id}): ${(err as Error).message}`,
      );
    } finally {
      this.writing = false;
    }
    if (this.pending !== undefined && !this.stopped) this.schedule();
  }
}
