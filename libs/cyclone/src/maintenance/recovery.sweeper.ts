import { Inject, Injectable, Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { CYCLONE_OPTIONS, CYCLONE_SCHEDULER } from '../cyclone.constants.js';
import { Loop } from '../common/loop.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import { RECOVERED_ERROR, RECOVERY_CANDIDATES, RECOVER_STEP, REFRESH_CLAIM_FLOOR, REWAKE_STALE_QUEUES } from '../sql/recovery.sql.js';
import type { ErrorKind } from '../sql/names.js';
import { CycloneStats } from '../runtime/cyclone-stats.js';
import type { StepFinished } from '../runtime/engine-events.js';
import { StepRegistry } from '../steps/step-registry.js';
import { retryDelay } from '../steps/retry-policy.js';
import type { MaintenanceService } from './maintenance-service.js';
import { leaseGraceMs, recoveryIntervalMs } from '../dispatch/dispatch-timing.js';

/** At most this many candidates a pass, so one pass stays short however much is stranded. */
const SWEEP_BATCH = 100;

export type RecoveryOutcome = 'timeout' | 'timeout_discarded' | 'reclaimed' | 'reclaim_limit';

/**
 * Crash recovery, run by every client at the poll interval; no leader. Steps
 * whose lease expired are reclaimed (or discarded past maxReclaims), steps
 * whose timeout elapsed have their attempt consumed. Each candidate is
 * settled by one call that locks the run, then the step, and re-checks, so
 * replicas sweeping together never apply an outcome twice. Each pass also
 * re-wakes queues whose due steps sat unclaimed, for wake-ups that were lost,
 * and keeps the claim's floor at the month of the oldest unfinished run.
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
    private readonly stats: CycloneStats,
  ) {
    const [min, max] = recoveryIntervalMs(options);
    stats.strandedAfterMs = leaseGraceMs(options) + 2 * max;
    this.loop = new Loop(
      'cyclone:recovery',
      () => min + Math.random() * (max - min),
      async () => void (await this.sweep()),
      scheduler,
      (err) => this.database.covers(err),
    );
  }

  /** Tells the engine's observers of an outcome this sweep committed; a failure is read back as stored. */
  private async tell(
    row: { id: string; run_id: string; node_id: string; kind: string; queue: string; attempt: number },
    outcome: RecoveryOutcome,
  ): Promise<void> {
    const failure =
      outcome === 'reclaimed' ? undefined : (await this.database.query(RECOVERED_ERROR, [row.run_id, row.id])).rows.at(0);
    this.stats.events.stepFinished({
      runId: row.run_id,
      nodeId: row.node_id,
      kind: row.kind,
      queue: row.queue,
      attempt: row.attempt,
      ...OBSERVED[outcome],
      error: failure?.error ?? undefined,
      errorKind: (failure?.error_kind ?? undefined) as ErrorKind | undefined,
    });
  }

  /** One pass; returns the outcome of each step it settled. */
  async sweep(): Promise<RecoveryOutcome[]> {
    const { rows } = await this.database.query(RECOVERY_CANDIDATES, [SWEEP_BATCH, leaseGraceMs(this.options)]);
    const outcomes: RecoveryOutcome[] = [];
    for (const row of rows) {
      // The step's own backoff is stored with it and wins (cyclone_fail_step), also when this
      // client does not run its kind; this delay is for steps written before it was stored.
      const delay = retryDelay(this.registry.find(row.kind), row.attempt, this.logger);
      const { rows: settled } = await this.database.query(RECOVER_STEP, [row.run_id, row.id, delay]);
      const outcome = settled[0].outcome as RecoveryOutcome | null;
      if (!outcome) continue;
      outcomes.push(outcome);
      if (this.stats.events.observed) await this.tell(row, outcome);
    }
    if (outcomes.length > 0) this.logger.warn(`Recovery: ${summarise(outcomes)}`);
    const dispatch = this.stats.dispatch;
    if (dispatch) {
      // A reclaimed step is available again: its outbox row was written with it.
      dispatch.count(dispatch.redispatched, 'lease_expired', outcomes.filter((o) => o === 'reclaimed').length);
    } else {
      // Several poll ticks without a claim: every live worker should have looked by then.
      const [, maxPollMs] = this.options.pollIntervalMs;
      await this.database.query(REWAKE_STALE_QUEUES, [Math.max(5 * maxPollMs, 5_000)]);
    }
    await this.database.query(REFRESH_CLAIM_FLOOR, []);
    return outcomes;
  }
}

/** What each settled outcome was for the attempt, as the engine's observers hear of it. */
const OBSERVED: Record<RecoveryOutcome, Pick<StepFinished, 'outcome' | 'failed'>> = {
  reclaimed: { outcome: 'reclaimed', failed: false },
  timeout: { outcome: 'retried', failed: true },
  timeout_discarded: { outcome: 'discarded', failed: true },
  reclaim_limit: { outcome: 'discarded', failed: false },
};

function summarise(outcomes: RecoveryOutcome[]): string {
  const counts = new Map<string, number>();
  for (const o of outcomes) counts.set(o, (counts.get(o) ?? 0) + 1);
  return [...counts].map(([o, n]) => `${n} ${o}`).join(', ');
}
