import type { CycloneDatabase } from '../database/cyclone-database.js';
import { COMPLETE_STEPS } from '../sql/complete.sql.js';
import { isRejectedData } from '../database/rejected-data.js';

interface PendingCompletion {
  id: string;
  generation: string;
  output: string;
  resolve: (completed: boolean) => void;
  reject: (err: unknown) => void;
}

/** More than this many completions wait for the next statement. */
const MAX_BATCH = 500;

/**
 * Records the completions of one client's workers in batches. The first
 * completion of an idle moment goes out on the next turn of the event loop
 * (with whatever finished in the same turn); completions that arrive while a
 * batch is on its way wait and go out together as soon as it returns. At low
 * load a completion is written at once; at high load one commit carries many.
 * An output the database refuses fails its own completion only: the batch is
 * split and each completion written alone.
 */
export class CompletionBatcher {
  private waiting: PendingCompletion[] = [];
  private scheduled = false;
  private inFlight = false;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly owner: string,
  ) {}

  /** Resolves true when the step was completed, false when its lease was no longer this attempt's. */
  complete(id: string, generation: string, output: string): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ id, generation, output, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    const batch = this.waiting.splice(0, MAX_BATCH);
    if (batch.length === 0) return;
    this.inFlight = true;
    try {
      await this.write(batch);
    } catch (err) {
      if (batch.length > 1 && isRejectedData(err)) {
        await Promise.all(batch.map((c) => this.write([c]).catch(c.reject)));
      } else {
        for (const c of batch) c.reject(err);
      }
    } finally {
      this.inFlight = false;
      if (this.waiting.length > 0) this.schedule();
    }
  }

  private async write(batch: PendingCompletion[]): Promise<void> {
    const { rows } = await this.database.query<{ id: string }>(
      COMPLETE_STEPS,
      [batch.map((c) => c.id), this.owner, batch.map((c) => c.generation), batch.map((c) => c.output)],
      'cyclone_complete_steps',
    );
    const completed = new Set(rows.map((r) => r.id));
    for (const c of batch) c.resolve(completed.has(c.id));
  }
}
