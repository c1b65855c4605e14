import { Logger } from '@nestjs/common';
import { CLAIM_STEPS } from '../sql/claim.sql.js';
import type { StepRegistry } from '../steps/step-registry.js';
import { StepExecution, type ExecutionDeps } from './step-execution.js';

/**
 * The workers of one queue: a number of slots, filled by one claim statement
 * for as many steps as there are free slots. Claims never overlap; a wake-up
 * that arrives during a claim makes it claim once more when it ends. A slot is
 * free again when its handler returns: recording the outcome (batched with
 * others) overlaps the next claim. The step stays in `running` until its
 * outcome is recorded, so shutdown waits for the write.
 */
export class QueueWorker {
  private readonly logger = new Logger('Cyclone');
  readonly running = new Map<string, StepExecution>();
  /** Slots whose handler has not returned yet. */
  private busy = 0;
  private claiming?: Promise<void>;
  private wakeAgain = false;
  /** The last claim filled every free slot: there may be more waiting. */
  private backlog = false;
  private stopped = false;
  private wakeScheduled = false;

  constructor(
    readonly queue: string,
    readonly slots: number,
    private readonly registry: StepRegistry,
    private readonly deps: ExecutionDeps,
  ) {}

  wake(): void {
    if (this.stopped || this.slots === 0) return;
    if (this.claiming) {
      this.wakeAgain = true;
      return;
    }
    this.claiming = this.claimWhileWork().finally(() => {
      this.claiming = undefined;
      // A wake-up that arrived after the last loop check must not be lost.
      if (this.wakeAgain) this.wake();
    });
  }

  /**
   * Wakes on the next turn of the event loop, so that slots freed together
   * (a batch of completions) are claimed for in one statement, not one each.
   */
  private wakeSoon(): void {
    if (this.wakeScheduled) return;
    this.wakeScheduled = true;
    setImmediate(() => {
      this.wakeScheduled = false;
      this.wake();
    });
  }

  /** Stops claiming and waits for a claim in flight, so every claimed step is in `running`. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.claiming;
  }

  private async claimWhileWork(): Promise<void> {
    try {
      do {
        this.wakeAgain = false;
        const free = this.slots - this.busy;
        if (free <= 0) break;
        const claimed = await this.claim(free);
        this.backlog = claimed === free;
      } while ((this.wakeAgain || this.backlog) && !this.stopped);
    } catch (err) {
      // Usually the database is unreachable. Claiming pauses until the next
      // poll tick or wake-up; nothing was claimed, so nothing is lost.
      this.deps.stats.claimFailures += 1;
      this.deps.stats.lastClaimError = (err as Error).message;
      this.logger.warn(`Claim on queue "${this.queue}" failed: ${(err as Error).message}`);
    }
  }

  private async claim(limit: number): Promise<number> {
    const { rows } = await this.deps.database.query(CLAIM_STEPS, [
      this.queue,
      this.registry.kinds(),
      limit,
      this.deps.owner,
      this.deps.leaseTtlMs,
    ]);
    for (const row of rows) {
      const execution = new StepExecution(row, this.registry.get(row.kind), this.deps);
      this.running.set(row.id, execution);
      this.busy += 1;
      void execution.handlerDone.then(() => {
        this.busy -= 1;
        if (this.backlog) this.wakeSoon();
      });
      void execution.start().finally(() => this.running.delete(row.id));
    }
    return rows.length;
  }
}
