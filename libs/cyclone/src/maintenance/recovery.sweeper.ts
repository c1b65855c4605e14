import { Inject, Injectable, Logger } from '@nestjs/common';
import { CYCLONE_OPTIONS } from '../cyclone.constants.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import type { ResolvedOptions } from '../module/resolved-options.js';
import { RECOVERY_CANDIDATES, RECOVER_STEP, REWAKE_STALE_QUEUES } from '../sql/recovery.sql.js';
import { StepRegistry } from '../steps/step-registry.js';
import { retryDelay } from '../worker/retry-policy.js';

/** At most this many candidates a pass, so one pass stays short however much is stranded. */
const SWEEP_BATCH = 100;

export type RecoveryOutcome = 'timeout' | 'timeout_discarded' | 'reclaimed' | 'reclaim_limit';

/**
 * Crash recovery, run by every client on its poll tick; no leader. Steps whose
 * lease expired are reclaimed (or discarded past maxReclaims), steps whose
 * timeout elapsed have their attempt consumed. Each candidate is settled by one
 * call that locks the run, then the step, and re-checks, so replicas sweeping
 * together never apply an outcome twice.
 */
@Injectable()
export class RecoverySweeper {
  private readonly logger = new Logger('Cyclone');

  constructor(
    private readonly database: CycloneDatabase,
    private readonly registry: StepRegistry,
    @Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions,
  ) {}

  /** One pass; returns the outcome of each step it settled. */
  async sweep(): Promise<RecoveryOutcome[]> {
    const { rows } = await this.database.query<{ id: string; kind: string; attempt: number }>(RECOVERY_CANDIDATES, [
      SWEEP_BATCH,
    ]);
    const outcomes: RecoveryOutcome[] = [];
    for (const row of rows) {
      const outcome = await this.recover(row.id, retryDelay(this.registry.find(row.kind), row.attempt, this.logger));
      if (outcome) outcomes.push(outcome);
    }
    if (outcomes.length > 0) this.logger.warn(`Recovery: ${summarise(outcomes)}`);
    await this.rewakeStaleQueues();
    return outcomes;
  }

  /** Settles one step if it still needs it; see cyclone_recover_step. */
  async recover(stepId: string, retryDelayMs: number): Promise<RecoveryOutcome | null> {
    const { rows } = await this.database.query(RECOVER_STEP, [stepId, retryDelayMs]);
    return rows[0].outcome as RecoveryOutcome | null;
  }

  private async rewakeStaleQueues(): Promise<void> {
    // Several poll ticks without a claim: every live worker should have looked by then.
    const [, maxPollMs] = this.options.pollIntervalMs;
    await this.database.query(REWAKE_STALE_QUEUES, [Math.max(5 * maxPollMs, 5_000)]);
  }
}

function summarise(outcomes: RecoveryOutcome[]): string {
  const counts = new Map<string, number>();
  for (const o of outcomes) counts.set(o, (counts.get(o) ?? 0) + 1);
  return [...counts].map(([o, n]) => `${n} ${o}`).join(', ');
}
