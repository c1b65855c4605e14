import { Inject, Injectable, Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { CYCLONE_OPTIONS, CYCLONE_SCHEDULER } from '../cyclone.constants.js';
import { Loop } from '../common/loop.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import { RECOVERY_CANDIDATES, RECOVER_STEP, REWAKE_STALE_QUEUES } from '../sql/recovery.sql.js';
import { StepRegistry } from '../steps/step-registry.js';
import { retryDelay } from '../steps/retry-policy.js';
import type { MaintenanceService } from './maintenance-service.js';

/** At most this many candidates a pass, so one pass stays short however much is stranded. */
const SWEEP_BATCH = 100;

export type RecoveryOutcome = 'timeout' | 'timeout_discarded' | 'reclaimed' | 'reclaim_limit';

/**
 * Crash recovery, run by every client at the poll interval; no leader. Steps
 * whose lease expired are reclaimed (or discarded past maxReclaims), steps
 * whose timeout elapsed have their attempt consumed. Each candidate is
 * settled by one call that locks the run, then the step, and re-checks, so
 * replicas sweeping together never apply an outcome twice. Each pass also
 * re-wakes queues whose due steps sat unclaimed, for wake-ups that were lost.
 */
@Injectable()
export class RecoverySweeper implements MaintenanceService {
  private readonly logger = new Logger('Cyclone');
  readonly loop: Loop;
  /** A client that starts after a crash recovers what the crash left at once. */
  readonly runsAtStartup = true;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly registry: StepRegistry,
    @Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(CYCLONE_SCHEDULER) scheduler: SchedulerRegistry,
  ) {
    const [min, max] = options.pollIntervalMs;
    this.loop = new Loop('cyclone:recovery', () => min + Math.random() * (max - min), async () => void (await this.sweep()), scheduler);
  }

  /** One pass; returns the outcome of each step it settled. */
  async sweep(): Promise<RecoveryOutcome[]> {
    const { rows } = await this.database.query(RECOVERY_CANDIDATES, [SWEEP_BATCH]);
    const outcomes: RecoveryOutcome[] = [];
    for (const row of rows) {
      // The step's own backoff is stored with it and wins (cyclone_fail_step), also when this
      // client does not run its kind; this delay is for steps written before it was stored.
      const delay = retryDelay(this.registry.find(row.kind), row.attempt, this.logger);
      const { rows: settled } = await this.database.query(RECOVER_STEP, [row.id, delay]);
      const outcome = settled[0].outcome as RecoveryOutcome | null;
      if (outcome) outcomes.push(outcome);
    }
    if (outcomes.length > 0) this.logger.warn(`Recovery: ${summarise(outcomes)}`);
    // Several poll ticks without a claim: every live worker should have looked by then.
    const [, maxPollMs] = this.options.pollIntervalMs;
    await this.database.query(REWAKE_STALE_QUEUES, [Math.max(5 * maxPollMs, 5_000)]);
    return outcomes;
  }
}

function summarise(outcomes: RecoveryOutcome[]): string {
  const counts = new Map<string, number>();
  for (const o of outcomes) counts.set(o, (counts.get(o) ?? 0) + 1);
  return [...counts].map(([o, n]) => `${n} ${o}`).join(', ');
}
