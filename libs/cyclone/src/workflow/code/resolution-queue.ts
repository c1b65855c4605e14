/** A result waiting to be handed to the workflow's method. */
interface Resolution {
  /** Its place in the order the workflow learned of results (cyclone_steps.observed). */
  observed: number;
  settle: () => void;
}

/**
 * The results of a pass's calls, handed to the method one at a time in the
 * order the run learned of them, whatever order the method asked for them
 * in: a replay must see a Promise.race, or the first failure of a
 * Promise.all, go the way it went the first time (see load-history.sql). The
 * pass hands out the first, lets the method run on it, then the next.
 */
export class ResolutionQueue {
  private readonly queued: Resolution[] = [];

  get size(): number {
    return this.queued.length;
  }

  push(observed: number, settle: () => void): void {
    // Mostly in order already: the search finds the end at once.
    let low = 0;
    let high = this.queued.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (this.queued[mid].observed <= observed) low = mid + 1;
      else high = mid;
    }
    this.queued.splice(low, 0, { observed, settle });
  }

  /** The first result, removed; undefined when none waits. */
  shift(): (() => void) | undefined {
    return this.queued.shift()?.settle;
  }
}
