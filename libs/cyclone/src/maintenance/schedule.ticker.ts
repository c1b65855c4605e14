import { Inject, Injectable, Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { CYCLONE_OPTIONS, CYCLONE_SCHEDULER, SCHEDULE_MAX_WAIT_MS, SCHEDULE_ON_TIME_MS } from '../cyclone.constants.js';
import { Loop } from '../common/loop.js';
import { toJson } from '../common/validate.js';
import { uuid7 } from '../common/uuid7.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { execute } from '../database/statement.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import type { CronSchedule } from '../schedules/cron-schedule.js';
import { ScheduleRegistry } from '../schedules/schedule-registry.js';
import { ENQUEUE_JOB } from '../sql/enqueue.sql.js';
import { CLAIM_SCHEDULE_TICK, REGISTER_SCHEDULES, SCHEDULE_STATE } from '../sql/schedules.sql.js';
import { flowKeys } from '../steps/flow-limits.js';
import { enqueueJobValues, jobParams, type NewJob } from '../steps/job-params.js';
import { backoffSchedule } from '../steps/retry-policy.js';
import { StepRegistry } from '../steps/step-registry.js';
import type { MaintenanceService } from './maintenance-service.js';

/** What a pass did with a schedule's due tick. */
export interface ScheduleTick {
  name: string;
  tick: Date;
  /** 'fired': this client started its run; 'taken': another client (or an earlier pass) had; 'skipped': missed, and catchUp is 'none'. */
  outcome: 'fired' | 'taken' | 'skipped';
  runId?: string;
}

/**
 * Fires the app's cron schedules, on every client; no leader. Each pass
 * reads the schedules' durable state and the database clock, and for each
 * schedule whose latest tick (at or before now) is later than the last one
 * fired, claims that tick and enqueues its run in one transaction (see
 * CLAIM_SCHEDULE_TICK): replicas racing for a tick, or a client killed in
 * the middle of one, give exactly one run a tick. The run's unique key
 * names the schedule and the tick (`schedule:<name>:<tick ISO>`).
 *
 * After downtime only the latest missed tick is owed: `catchUp: 'latest'`
 * starts it once, `'none'` skips it (a tick counts as missed once it is
 * more than SCHEDULE_ON_TIME_MS old). The next pass is timed for the next
 * tick of any schedule, on the database clock.
 */
@Injectable()
export class ScheduleTicker implements MaintenanceService {
  private readonly logger = new Logger('Cyclone');
  readonly loop: Loop;
  readonly runsAtStartup = true;
  private registered = false;
  private nextWaitMs = SCHEDULE_MAX_WAIT_MS;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly schedules: ScheduleRegistry,
    private readonly steps: StepRegistry,
    @Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(CYCLONE_SCHEDULER) scheduler: SchedulerRegistry,
  ) {
    this.loop = new Loop(
      'cyclone:schedules',
      () => this.nextWaitMs,
      async () => void (await this.tick()),
      scheduler,
      (err) => this.database.covers(err),
    );
  }

  /** One pass; returns what it did with each due tick. */
  async tick(): Promise<ScheduleTick[]> {
    const schedules = this.schedules.all();
    if (schedules.length === 0) {
      this.nextWaitMs = SCHEDULE_MAX_WAIT_MS;
      return [];
    }
    if (!this.registered) await this.register(schedules);
    const { rows } = await this.database.query(SCHEDULE_STATE, [schedules.map((s) => s.name)]);
    const now = rows[0].now;
    const state = new Map(rows.filter((r) => r.name !== null).map((r) => [r.name, r]));
    const ticks: ScheduleTick[] = [];
    for (const schedule of schedules) {
      const row = state.get(schedule.name);
      // Removed by someone meanwhile (a migration down and up): register again.
      if (!row) {
        this.registered = false;
        continue;
      }
      const owedAfter = row.last_tick_at && row.last_tick_at > row.since ? row.last_tick_at : row.since;
      const tick = schedule.latestAtOrBefore(now);
      if (!tick || tick <= owedAfter) continue;
      if (schedule.catchUp === 'none' && now.getTime() - tick.getTime() > SCHEDULE_ON_TIME_MS) {
        ticks.push({ name: schedule.name, tick, outcome: 'skipped' });
        continue;
      }
      ticks.push(await this.fire(schedule, tick, now));
    }
    const next = Math.min(...schedules.map((s) => (s.nextAfter(now)?.getTime() ?? Infinity) - now.getTime()));
    // A few milliseconds past the tick, so that it is due on the database clock.
    this.nextWaitMs = Math.max(5, Math.min(next + 5, SCHEDULE_MAX_WAIT_MS));
    for (const t of ticks) {
      if (t.outcome === 'fired') this.logger.debug(`Schedule ${t.name}: tick ${t.tick.toISOString()} started run ${t.runId}`);
      if (t.outcome === 'skipped' && !this.skipped.has(`${t.name}:${t.tick.getTime()}`)) {
        this.skipped.add(`${t.name}:${t.tick.getTime()}`);
        this.logger.log(`Schedule ${t.name}: missed tick ${t.tick.toISOString()} skipped (catchUp 'none')`);
      }
    }
    return ticks;
  }

  private readonly skipped = new Set<string>();

  private async register(schedules: CronSchedule[]): Promise<void> {
    const now = new Date();
    await this.database.query(REGISTER_SCHEDULES, [
      schedules.map((s) => s.name),
      schedules.map((s) => s.kind),
      schedules.map((s) => s.cron),
      schedules.map((s) => s.timezone),
      schedules.map((s) => s.nextAfter(now)),
    ]);
    this.registered = true;
  }

  /** Claims the tick and enqueues its run, in one transaction. */
  private async fire(schedule: CronSchedule, tick: Date, now: Date): Promise<ScheduleTick> {
    const step = this.steps.get(schedule.kind);
    const uniqueKey = `schedule:${schedule.name}:${tick.toISOString()}`;
    const params = jobParams(step, { unique: uniqueKey }, this.options);
    const job: NewJob = {
      runId: uuid7(),
      params,
      inputJson: toJson(schedule.input, `input of schedule "${schedule.name}"`, this.options.maxPayloadBytes),
      keys: flowKeys(step.kind, step.flow, schedule.input),
      traceContext: null,
      backoffMs: backoffSchedule(step, params.maxAttempts, this.logger),
    };
    return this.database.transaction(async (client) => {
      const claimed = await execute(client, CLAIM_SCHEDULE_TICK, [schedule.name, tick, job.runId, schedule.nextAfter(now)]);
      if (claimed.rowCount === 0) return { name: schedule.name, tick, outcome: 'taken' };
      // With notify: the wake-up goes out when the transaction commits.
      const { rows } = await execute(client, ENQUEUE_JOB, enqueueJobValues(job, true));
      // No row: a run of this very tick already holds its key; the tick has its run.
      return { name: schedule.name, tick, outcome: rows.length > 0 ? 'fired' : 'taken', runId: rows[0]?.id };
    });
  }
}
