/** At most this many steps a slot are claimed ahead. */
const AHEAD_PER_SLOT = 3;

/** The lease of a step claimed ahead by the plain claim, at most (never more than the lease TTL). */
const AHEAD_LEASE_MS = 3_000;

/**
 * How long a step claimed ahead is leased for, and how long it may wait at
 * hand for a slot: a third of that, so that one started at the last moment
 * still has two thirds of its lease for its first renewal to land.
 */
export function aheadTimes(leaseTtlMs: number): { leaseMs: number; maxWaitMs: number } {
  const leaseMs = Math.min(leaseTtlMs, AHEAD_LEASE_MS);
  return { leaseMs, maxWaitMs: leaseMs / 3 };
}

/** Weight of the newest sample in the moving averages. */
const WEIGHT = 0.2;

/**
 * How many steps a queue's claim takes beyond its free slots. Under a
 * backlog of short steps, a claim for the few slots that just freed costs
 * more than the steps it brings: each claim walks the head of the claim
 * index (the entries of steps claimed since the last vacuum) and commits.
 * Claiming ahead keeps the next steps at hand, leased, started the moment a
 * slot frees, and makes each claim a larger one.
 *
 * A step claimed ahead should wait about one claim's round trip, no more:
 * the number ahead is what the slots finish in that time (slots × claim time
 * ÷ handler time), at most AHEAD_PER_SLOT a slot. Slow handlers bring it to
 * none, and without a backlog the worker claims exactly what it can start,
 * so a lone step is never held behind others.
 */
export class ClaimAhead {
  private claimMs?: number;
  private handlerMs?: number;

  /** A claim that brought steps took this long. */
  claimed(ms: number): void {
    this.claimMs = average(this.claimMs, ms);
  }

  /** A handler returned after this long. */
  handled(ms: number): void {
    this.handlerMs = average(this.handlerMs, ms);
  }

  /**
   * A step claimed ahead waited this long without a slot freeing: the slots
   * are slower than their average said (handlers that are still running do
   * not count in it), so this counts as one handler's time.
   */
  stalled(waitedMs: number): void {
    this.handled(waitedMs);
  }

  /** How many to claim beyond the free slots now. */
  size(slots: number): number {
    if (this.claimMs === undefined || this.handlerMs === undefined) return 0;
    const finishedPerClaim = (slots * this.claimMs) / Math.max(this.handlerMs, 0.01);
    return Math.min(AHEAD_PER_SLOT * slots, Math.floor(finishedPerClaim));
  }
}

function average(current: number | undefined, sample: number): number {
  return current === undefined ? sample : current + WEIGHT * (sample - current);
}
