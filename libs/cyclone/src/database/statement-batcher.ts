import { isRejectedData } from './rejected-data.js';

interface Waiting<T, R> {
  item: T;
  resolve: (result: R) => void;
  reject: (err: unknown) => void;
}

/**
 * Writes the items of many concurrent callers with one statement per batch.
 * An item added while no statement is on its way goes out at once (with
 * `gather`, on the next turn of the event loop, together with whatever else
 * was added in that turn); items added while one is on its way wait and go
 * out together when it returns, so callers share commits instead of queueing
 * for one each. Each caller's promise settles with its own result. A batch the
 * database refuses on its data is split and each item written alone, so only
 * the bad item's caller gets the error.
 */
export class StatementBatcher<T, R> {
  private waiting: Waiting<T, R>[] = [];
  /** A write is scheduled or on its way. */
  private busy = false;

  constructor(
    /** Writes items in one statement; results in the items' order. */
    private readonly write: (items: T[]) => Promise<R[]>,
    private readonly maxBatch: number,
    private readonly gather = false,
  ) {}

  add(item: T): Promise<R> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (this.busy) return;
      this.busy = true;
      if (this.gather) setImmediate(() => void this.drain());
      else void this.drain();
    });
  }

  private async drain(): Promise<void> {
    while (this.waiting.length > 0) await this.writeBatch(this.waiting.splice(0, this.maxBatch));
    this.busy = false;
  }

  private async writeBatch(batch: Waiting<T, R>[]): Promise<void> {
    try {
      const results = await this.write(batch.map((w) => w.item));
      batch.forEach((w, i) => w.resolve(results[i]));
    } catch (err) {
      if (batch.length > 1 && isRejectedData(err)) {
        // The statement wrote nothing; find whose item it was by writing each alone.
        await Promise.all(batch.map((w) => this.writeBatch([w])));
      } else {
        for (const w of batch) w.reject(err);
      }
    }
  }
}
