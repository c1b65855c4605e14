import { Inject, Injectable, Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { CYCLONE_OPTIONS, CYCLONE_SCHEDULER } from '../cyclone.constants.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import { DUE_TIMERS, DUE_TIMERS_AND_NEXT, FIRE_TIMER } from '../sql/timers.sql.js';
import { TIMER_CHANNEL } from '../sql/names.js';
import { NotificationListener } from '../notifications/notification-listener.js';
import { quietDelay } from '../dispatch/dispatch-timing.js';
import { Loop } from '../common/loop.js';
import type { MaintenanceService } from './maintenance-service.js';

/** At most this many timers a pass, so one pass stays short. */
const TIMER_BATCH = 100;

/** What a fired timer did; `retry_due`: a code workflow's inline call may run again. */
export type TimerOutcome = 'slept' | 'signal_timeout' | 'continued' | 'retry_due';

/**
 * Fires due timers: sleep nodes complete, signal waits past their timeout are
 * discarded (or continue). Its loop runs on every client, enqueue-only ones
 * too, at the poll interval, so timers need no leader. With broker dispatch
 * on, where idle clients are to send the database next to nothing, it sleeps
 * instead until the next timer is due, and looks again whenever a timer is
 * set anywhere (the NOTIFY of migration 15's trigger); it polls only while
 * its LISTEN connection is down. Each timer is fired by
 * one call that locks the run, then the step, and re-checks that it is still
 * waiting and due: replicas firing the same timer, or a signal arriving at
 * the same moment, apply one outcome.
 */
@Injectable()
export class TimerSweeper implements MaintenanceService {
  private readonly logger = new Logger('Cyclone');
  readonly loop: Loop;
  readonly runsAtStartup = false;

  /** With broker dispatch on: when the next timer is due, as the last pass read it. */
  private nextDueMs: number | null = null;

  constructor(
    private readonly database: CycloneDatabase,
    @Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(CYCLONE_SCHEDULER) scheduler: SchedulerRegistry,
    listener: NotificationListener,
  ) {
    const [min, max] = options.pollIntervalMs;
    const poll = () => min + Math.random() * (max - min);
    this.loop = new Loop(
      'cyclone:timers',
      options.dispatch ? () => quietDelay(listener, poll, this.nextDueMs) : poll,
      async () => void (await this.fire()),
      scheduler,
      (err) => this.database.covers(err),
    );
    if (options.dispatch) {
      listener.on(TIMER_CHANNEL, () => this.loop.trigger());
      listener.onReconnect(() => this.loop.trigger());
    }
  }

  /** One pass; returns what each timer it fired did. */
  async fire(): Promise<TimerOutcome[]> {
    const due = await this.dueTimers();
    const outcomes: TimerOutcome[] = [];
    for (const { run_id, id } of due) {
      const { rows: fired } = await this.database.query(FIRE_TIMER, [run_id, id]);
      const outcome = fired[0].outcome;
      if (outcome) outcomes.push(outcome);
    }
    if (outcomes.length > 0) this.logger.debug(`Timers fired: ${outcomes.join(', ')}`);
    return outcomes;
  }

  /** The due timers; with broker dispatch on, read with when the next one falls due, in the same statement. */
  private async dueTimers(): Promise<{ run_id: string; id: string }[]> {
    if (!this.options.dispatch) return (await this.database.query(DUE_TIMERS, [TIMER_BATCH])).rows;
    const { rows } = await this.database.query(DUE_TIMERS_AND_NEXT, [TIMER_BATCH]);
    const due = rows.filter((row): row is { run_id: string; id: string; due_in_ms: null } => row.id !== null);
    // A full batch leaves more due: the next pass comes at once.
    this.nextDueMs = due.length === TIMER_BATCH ? 0 : rows[rows.length - 1].due_in_ms;
    return due;
  }
}
