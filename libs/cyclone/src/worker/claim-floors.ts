/** How often at most a worker looks below its floors (on its poll ticks). */
const FLOOR_CHECK_MS = 1_000;
/**
 * A look that took longer waits this many times as long before the next:
 * while the vacuum is held back a look reads the whole head of the index,
 * which grows, and it should not take more than a twentieth of the time.
 */
const FLOOR_CHECK_SPACING = 20;

/**
 * A worker's floors, one for each priority band of its queue it has claimed
 * from: a time (the database's) below which no step of the band that it
 * could take is available, so its claims start each band there instead of
 * reading the claim index from the start (sql/functions/claim-bands.sql:
 * what that costs while the vacuum is held back). Each claim returns the
 * floors for the next. A step can become available below a floor (a slow
 * enqueue's, or one handed back or reclaimed, which keep their place): the
 * worker looks below its floors on its poll ticks and lowers them to what
 * it finds. Floors are a hint for where to start reading, never a reason to
 * leave a step: forgetting them only makes claims read from the start.
 */
export class ClaimFloors {
  /** Bands, highest first, and their floors. */
  private bands: number[] = [];
  private floors: Date[] = [];
  private checkedAt = 0;
  private checkTookMs = 0;

  /** The bands and floors for a claim or an enqueue's start. */
  params(): [bands: number[], floors: Date[]] {
    return [this.bands, this.floors];
  }

  /** The floors a claim returned (highest band first): for every band it read, and the ones it did not reach, kept. */
  claimed(bands: number[], floors: Date[]): void {
    this.bands = bands;
    this.floors = floors;
  }

  /**
   * What a look below the floors found, for the floors it was given: each
   * floor goes down to the step found under it. A claim that returned in
   * the meantime may have moved a floor; the lower of the two is kept.
   */
  lowered(bands: number[], floors: Date[]): void {
    // A new array: the one params() gave may still be on its way in a query.
    this.floors = this.floors.map((floor, at) => {
      const i = bands.indexOf(this.bands[at]);
      return i >= 0 && floors[i] < floor ? floors[i] : floor;
    });
  }

  /** The next claim reads every band from its start (steps handed back to this worker keep their place below its floors). */
  forget(): void {
    this.bands = [];
    this.floors = [];
  }

  /** Whether a look below the floors is due: there are floors, and the last look ended long enough ago. */
  checkDue(now: number): boolean {
    return this.bands.length > 0 && now - this.checkedAt >= Math.max(FLOOR_CHECK_MS, FLOOR_CHECK_SPACING * this.checkTookMs);
  }

  /** A look below the floors began at `startedAt` and has ended. */
  checked(startedAt: number, now: number): void {
    this.checkedAt = now;
    this.checkTookMs = now - startedAt;
  }
}
