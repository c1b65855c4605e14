/** A schedule as `listSchedules()` shows it. */
export interface ScheduleInfo {
  name: string;
  kind: string;
  cron: string;
  timezone: string;
  /** The next tick after now; null when the expression fires no more. */
  nextTickAt: Date | null;
  /** The last tick fired, by any replica; null before the first. */
  lastTickAt: Date | null;
}
