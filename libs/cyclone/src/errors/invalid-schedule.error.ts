import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** A schedule whose cron expression or time zone cannot be used; startup fails with it. */
export class InvalidScheduleError extends CycloneError {
  constructor(
    readonly schedule: string,
    readonly kind: string,
    readonly cron: unknown,
    problem: string,
  ) {
    super('invalid_schedule', messages.invalidSchedule(schedule, kind, cron, problem));
  }
}
