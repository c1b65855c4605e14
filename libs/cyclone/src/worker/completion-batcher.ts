import type { CycloneDatabase } from '../database/cyclone-database.js';
import { StatementBatcher } from '../database/statement-batcher.js';
import { COMPLETE_STEPS } from '../sql/complete.sql.js';

interface Completion {
  runId: string;
  id: string;
  generation: string;
  output: string;
}

/** More than this many completions wait for the next statement. */
const MAX_BATCH = 500;

/**
 * Records the completions of one client's workers in batches. The first
 * completion of an idle moment goes out on the next turn of the event loop,
 * with whatever finished in the same turn; completions that arrive while a
 * batch is on its way go out together as soon as it returns. At low load a
 * completion is written at once; at high load one commit carries many. An
 * output the database refuses fails its own completion only.
 */
export class CompletionBatcher {
  private readonly batcher: StatementBatcher<Completion, boolean>;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly owner: string,
  ) {
    this.batcher = new StatementBatcher((batch) => this.write(batch), MAX_BATCH, true);
  }

  /** Resolves true when the step was completed, false when its lease was no longer this attempt's. */
  complete(runId: string, id: string, generation: string, output: string): Promise<boolean> {
    return this.batcher.add({ runId, id, generation, output });
  }

  private async write(batch: Completion[]): Promise<boolean[]> {
    const { rows } = await this.database.query(COMPLETE_STEPS, [
      batch.map((c) => c.runId),
      batch.map((c) => c.id),
      this.owner,
      batch.map((c) => c.generation),
      batch.map((c) => c.output),
    ]);
    // By id and generation: a stale and a fresh completion of one step can share a batch.
    const completed = new Set(rows.map((r) => `${r.id}:${r.generation}`));
    return batch.map((c) => completed.has(`${c.id}:${c.generation}`));
  }
}
