import { Cron } from 'croner';
import { InvalidScheduleError } from '../errors/invalid-schedule.error.js';
import type { CatchUp } from '../interfaces/step-options.interface.js';

/** What a schedule is made of, from `@Step(kind, { schedule })` or the module's `schedules`. */
export interface ScheduleSpec {
  name: string;
  kind: string;
  cron: unknown;
  timezone?: unknown;
  input?: unknown;
  catchUp?: unknown;
}

/**
 * A schedule with its expression parsed. Ticks are computed by croner, in
 * the schedule's time zone: a time that a daylight-saving change skips runs
 * at the first moment after the change, and a time the change repeats runs
 * once.
 */
export class CronSchedule {
  private readonly cronJob: Cron;

  private constructor(
    readonly name: string,
    readonly kind: string,
    readonly cron: string,
    readonly timezone: string,
    readonly input: unknown,
    readonly catchUp: CatchUp,
  ) {
    const fields = cron.trim().split(/\s+/).length;
    this.cronJob = new Cron(cron, { paused: true, timezone, mode: fields === 6 ? '6-part' : '5-part' });
  }

  /** Checks the spec: 5 or 6 fields, a valid expression, a known time zone. Throws InvalidScheduleError. */
  static compile(spec: ScheduleSpec): CronSchedule {
    const { name, cron } = spec;
    // (Errors below name the schedule, its step and its expression.)
    if (typeof cron !== 'string' || cron.trim() === '') throw new InvalidScheduleError(name, spec.kind, cron, 'the expression must be a non-empty string');
    const fields = cron.trim().split(/\s+/).length;
    if (fields !== 5 && fields !== 6) {
      throw new InvalidScheduleError(name, spec.kind, cron, `it has ${fields} fields`);
    }
    const timezone = spec.timezone ?? 'UTC';
    if (typeof timezone !== 'string') throw new InvalidScheduleError(name, spec.kind, cron, 'its timezone must be a string');
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    } catch {
      throw new InvalidScheduleError(name, spec.kind, cron, `the time zone ${JSON.stringify(timezone)} is unknown`);
    }
    const catchUp = spec.catchUp ?? 'latest';
    if (catchUp !== 'latest' && catchUp !== 'none') {
      throw new InvalidScheduleError(name, spec.kind, cron, `catchUp must be 'latest' or 'none', not ${JSON.stringify(catchUp)}`);
    }
    let schedule: CronSchedule;
    try {
      schedule = new CronSchedule(name, spec.kind, cron.trim(), timezone, spec.input ?? null, catchUp);
    } catch (err) {
      throw new InvalidScheduleError(name, spec.kind, cron, (err as Error).message.replace(/^CronPattern: /, ''));
    }
    if (schedule.nextAfter(new Date()) === null) throw new InvalidScheduleError(name, spec.kind, cron, 'it never fires');
    return schedule;
  }

  /** The first tick strictly after `after`; null if there is none. */
  nextAfter(after: Date): Date | null {
    return this.cronJob.nextRun(after);
  }

  /** The latest tick at or before `at`; null if there is none. */
  latestAtOrBefore(at: Date): Date | null {
    return this.cronJob.previousRuns(1, new Date(at.getTime() + 1))[0] ?? null;
  }
}
