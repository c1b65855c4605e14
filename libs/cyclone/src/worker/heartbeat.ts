import type { Logger } from '@nestjs/common';
import type { CycloneDatabase } from '../database/cyclone-database.js';
import type { AbortReason } from '../errors/step-aborted.error.js';
import { LEASE_LOSS_REASON, RENEW_LEASE } from '../sql/lease.sql.js';
import type { ClaimedStep } from './claimed-step.js';
import type { WorkerStats } from './worker-stats.js';

/**
 * One claimed step's lease renewal: every leaseTtl/3 with a random first phase
 * and ±10 % jitter, so a client's steps do not renew in lockstep. When a
 * renewal matches no row the step is no longer this worker's, and `onLost`
 * gets the reason.
 */
export class Heartbeat {
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private readonly interval: number;

  constructor(
    private readonly step: ClaimedStep,
    private readonly database: CycloneDatabase,
    private readonly owner: string,
    private readonly leaseTtlMs: number,
    private readonly stats: WorkerStats,
    private readonly logger: Logger,
    private readonly onLost: (reason: AbortReason) => void,
  ) {
    this.interval = leaseTtlMs / 3;
  }

  start(): void {
    this.schedule(Math.random() * this.interval);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.beat(), delay);
  }

  private async beat(): Promise<void> {
    try {
      const { rowCount } = await this.database.query(RENEW_LEASE, [
        this.leaseTtlMs,
        this.step.id,
        this.owner,
        this.step.lease_generation,
      ]);
      if (this.stopped) return;
      if (rowCount === 0) {
        this.stopped = true;
        this.onLost(await this.lossReason());
        return;
      }
    } catch (err) {
      // The database is unreachable: keep trying. If it stays away past the
      // TTL, the step is reclaimed and the next renewal that gets through
      // matches nothing.
      this.stats.heartbeatFailures += 1;
      this.logger.warn(`Heartbeat of step ${this.step.node_id} (run ${this.step.run_id}) failed: ${(err as Error).message}`);
    }
    this.schedule(this.interval * (0.9 + Math.random() * 0.2));
  }

  private async lossReason(): Promise<AbortReason> {
    const { rows } = await this.database.query(LEASE_LOSS_REASON, [this.step.id]);
    const row = rows[0] as { state: string; lease_generation: string; timed_out: boolean } | undefined;
    if (row?.state === 'cancelled') return 'cancelled';
    if (row?.state === 'running' && row.lease_generation === this.step.lease_generation && row.timed_out) {
      return 'timeout';
    }
    return 'lease_lost';
  }
}
