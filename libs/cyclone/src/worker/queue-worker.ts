import { Logger } from '@nestjs/common';
import type { StepRegistry } from '../steps/step-registry.js';
import { FlowSource, PlainSource, type ClaimSource } from './claim-source.js';
import type { ClaimedStep } from '../sql/claim.sql.js';
import { StepExecution, type ExecutionDeps } from './step-execution.js';

/**
 * The workers of one queue: a number of slots, filled by one claim statement
 * for as many steps as there are free slots. Claims never overlap; a wake-up
 * that arrives during a claim makes it claim once more when it ends. A slot is
 * free again when its handler returns: recording the outcome (batched with
 * others) overlaps the next claim. The step stays in `running` until its
 * outcome is recorded, so shutdown waits for the write.
 *
 * A queue claims from one source, or several when some of its kinds have
 * limits or the queue has a cap (see ClaimSource); each claim starts from
 * the next source in turn, so none has the free slots first every time. When
 * a limit held due work back, the worker claims again as soon as one of its
 * own steps has finished (its outcome recorded, so its room is free);
 * another client's finished steps are seen at the next poll tick.
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
  /** The last claim left due work because a limit had no room. */
  private heldBack = false;
  private stopped = false;
  private wakeScheduled = false;
  private readonly sources: ClaimSource[] = [];
  private nextSource = 0;

  constructor(
    readonly queue: string,
    readonly slots: number,
    private readonly registry: StepRegistry,
    private readonly deps: ExecutionDeps,
    queueCap: number | null = null,
  ) {
    const ctx = { database: deps.database, queue, owner: deps.owner, leaseTtlMs: deps.leaseTtlMs, queueCap };
    const steps = registry.all();
    const unlimited = steps.filter((s) => !s.flow).map((s) => s.kind);
    if (unlimited.length > 0 || steps.length === 0) {
      this.sources.push(queueCap === null ? new PlainSource(ctx, unlimited) : new FlowSource(ctx, unlimited, undefined));
    }
    for (const step of steps) if (step.flow) this.sources.push(new FlowSource(ctx, [step.kind], step.flow));
  }

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
        if (this.slots - this.busy <= 0) break;
        let filled = false;
        let heldBack = false;
        const first = this.nextSource;
        this.nextSource = (first + 1) % this.sources.length;
        for (let i = 0; i < this.sources.length && !this.stopped; i++) {
          const free = this.slots - this.busy;
          if (free <= 0) {
            filled = true;
            break;
          }
          const claim = await this.sources[(first + i) % this.sources.length].claim(free);
          this.start(claim.rows);
          filled ||= claim.rows.length === free;
          heldBack ||= claim.heldBack;
        }
        this.backlog = filled;
        this.heldBack = heldBack;
      } while ((this.wakeAgain || this.backlog) && !this.stopped);
    } catch (err) {
      // Usually the database is unreachable. Claiming pauses until the next
      // poll tick or wake-up; nothing was claimed, so nothing is lost.
      this.deps.stats.claimFailures += 1;
      this.deps.stats.lastClaimError = (err as Error).message;
      this.logger.warn(`Claim on queue "${this.queue}" failed: ${(err as Error).message}`);
    }
  }

  private start(rows: ClaimedStep[]): void {
    for (const row of rows) {
      const execution = new StepExecution(row, this.registry.get(row.kind), this.deps);
      this.running.set(row.id, execution);
      this.busy += 1;
      void execution.handlerDone.then(() => {
        this.busy -= 1;
        if (this.backlog) this.wakeSoon();
      });
      void execution.start().finally(() => {
        this.running.delete(row.id);
        // Its outcome is recorded: the room it held under a limit is free.
        if (this.heldBack) this.wakeSoon();
      });
    }
  }
}
