/** How often at most a worker looks below its floors (on its poll ticks). */
export const FLOOR_CHECK_MS = 1_000;

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

  /** The bands and floors for a claim or an enqueue's start. */
  params(): [bands: number[], floors: Date[]] {
    return [this.bands, this.floors];
  }

  /** The floors a claim returned: for every band it read, and the ones it did not reach, kept. */
  claimed(bands: number[], floors: Date[]): void {
    const order = bands.map((band, i) => ({ band, floor: floors[i] })).sort((a, b) => b.band - a.band);
    this.bands = order.map((o) => o.band);
    this.floors = order.map((o) => o.floor);
  }

  /**
   * What a look below the floors found, for the floors it was given: each
   * floor goes down to the step found under it. A claim that returned in
   * the meantime may have moved a floor; the lower of the two is kept.
   */
  lowered(bands: number[], floors: Date[]): boolean {
    let lowered = false;
    bands.forEach((band, i) => {
      const at = this.bands.indexOf(band);
      if (at >= 0 && floors[i] < this.floors[at]) {
        this.floors[at] = floors[i];
        lowered = true;
      }
    });
    return lowered;
  }

  /** The next claim reads every band from its start (steps handed back to this worker keep their place below its floors). */
  forget(): void {
    this.bands = [];
    this.floors = [];
  }

  /** Whether a look below the floors is due: there are floors, and the last look was FLOOR_CHECK_MS ago. */
  checkDue(now: number): boolean {
    if (this.bands.length === 0 || now - this.checkedAt < FLOOR_CHECK_MS) return false;
    this.checkedAt = now;
    return true;
  }
}
