import type { Logger } from '@nestjs/common';
import type { CycloneDatabase } from '../database/cyclone-database.js';
import type { AbortReason } from '../errors/step-aborted.error.js';
import { LEASE_LOSS_REASON, RENEW_LEASE } from '../sql/lease.sql.js';
import type { ClaimedStep } from '../sql/claim.sql.js';
import type { CycloneStats } from '../runtime/cyclone-stats.js';

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
    private readonly stats: CycloneStats,
    private readonly logger: Logger,
    private readonly onLost: (reason: AbortReason) => void,
  ) {
    this.interval = leaseTtlMs / 3;
  }

  /**
   * The first renewal comes at a random point of the second half of the
   * first interval: random, so steps claimed together do not renew in
   * lockstep; not in the first half, where the lease was just granted and a
   * renewal buys nothing but a row lock that a completion may then wait on.
   * A step claimed ahead holds a shorter lease, until `leaseEndsAt`
   * (performance.now() time): its first renewal comes halfway to that end,
   * unless the step has finished by then, as short steps do.
   */
  start(leaseEndsAt?: number): void {
    const first = this.interval * (0.5 + Math.random() / 2);
    this.schedule(leaseEndsAt === undefined ? first : Math.min(first, Math.max(0, (leaseEndsAt - performance.now()) / 2)));
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
        this.step.run_id,
        this.step.id,
        this.owner,
        this.step.lease_generation,
      ]);
      if (this.stopped) return;
      if (rowCount === 0) {
        this.stopped = true;
        // The step is not ours any more whatever the reason; if asking why fails, call it a lost lease.
        const reason = await this.lossReason().catch((err: Error) => {
          this.logger.warn(`Could not read why the lease of step ${this.step.node_id} was lost: ${err.message}`);
          return 'lease_lost' as const;
        });
        this.onLost(reason);
        return;
      }
    } catch (err) {
      // The database is unreachable: keep trying. If it stays away past the
      // TTL, the step is reclaimed and the next renewal that gets through
      // matches nothing.
      this.stats.heartbeatFailures += 1;
      if (!this.database.covers(err)) {
        this.logger.warn(`Heartbeat of step ${this.step.node_id} (run ${this.step.run_id}) failed: ${(err as Error).message}`);
      }
    }
    this.schedule(this.interval * (0.9 + Math.random() * 0.2));
  }

  private async lossReason(): Promise<AbortReason> {
    const { rows } = await this.database.query(LEASE_LOSS_REASON, [this.step.run_id, this.step.id]);
    const row = rows.at(0);
    if (row?.state === 'cancelled') return 'cancelled';
    // Not claimed again since this worker's claim (a claim bumps the generation).
    if (row?.lease_generation !== this.step.lease_generation) return 'lease_lost';
    if (row.state === 'running' && row.timed_out) return 'timeout';
    // The sweep got there first and consumed this attempt for its timeout (a reclaim keeps the attempt).
    const consumed =
      (row.state === 'available' && row.attempt === this.step.attempt + 1) ||
      (row.state === 'discarded' && row.attempt === this.step.attempt);
    return consumed && row.error_kind === 'timeout' ? 'timeout' : 'lease_lost';
  }
}
