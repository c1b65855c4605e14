import { describe, expect, it } from '@jest/globals';
import { InvalidScheduleError } from '../errors/invalid-schedule.error.js';
import { CronSchedule } from './cron-schedule.js';

const at = (iso: string) => new Date(iso);
const compile = (cron: string, timezone?: string) => CronSchedule.compile({ name: 'nightly', kind: 'report', cron, timezone });

/** The ticks from `from` (exclusive) until `to`, following nextAfter. */
function ticks(schedule: CronSchedule, from: string, to: string): string[] {
  const out: string[] = [];
  for (let t = schedule.nextAfter(at(from)); t && t < at(to); t = schedule.nextAfter(t)) out.push(t.toISOString());
  return out;
}

describe('CronSchedule', () => {
  it('reads 5 fields as minutes and 6 with seconds first', () => {
    expect(ticks(compile('*/20 * * * *'), '2026-01-01T00:00:00Z', '2026-01-01T01:00:00Z')).toEqual([
      '2026-01-01T00:20:00.000Z',
      '2026-01-01T00:40:00.000Z',
    ]);
    expect(ticks(compile('*/20 * * * * *'), '2026-01-01T00:00:00Z', '2026-01-01T00:01:00Z')).toEqual([
      '2026-01-01T00:00:20.000Z',
      '2026-01-01T00:00:40.000Z',
    ]);
  });

  it('the latest tick at or before a moment includes a tick exactly then', () => {
    const s = compile('0 3 * * *');
    expect(s.latestAtOrBefore(at('2026-01-05T03:00:00Z'))?.toISOString()).toBe('2026-01-05T03:00:00.000Z');
    expect(s.latestAtOrBefore(at('2026-01-05T02:59:59Z'))?.toISOString()).toBe('2026-01-04T03:00:00.000Z');
  });

  it('in a time zone, across daylight-saving changes: a skipped time runs once after the change, a repeated one once', () => {
    const berlin = compile('30 2 * * *', 'Europe/Berlin');
    // 29 March 2026: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist that night.
    expect(ticks(berlin, '2026-03-27T12:00:00Z', '2026-03-31T12:00:00Z')).toEqual([
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // 03:00 CEST, the first moment after the gap
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
      '2026-03-31T00:30:00.000Z',
    ]);
    // 25 October 2026: 03:00 CEST falls back to 02:00 CET, so 02:30 happens twice; it runs once.
    expect(ticks(berlin, '2026-10-24T12:00:00Z', '2026-10-26T12:00:00Z')).toEqual([
      '2026-10-25T00:30:00.000Z', // 02:30 CEST
      '2026-10-26T01:30:00.000Z', // 02:30 CET
    ]);
    // Hourly in New York across the fall-back: every real hour, once.
    const ny = compile('0 * * * *', 'America/New_York');
    expect(ticks(ny, '2026-11-01T04:30:00Z', '2026-11-01T08:30:00Z')).toEqual([
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T06:00:00.000Z',
      '2026-11-01T07:00:00.000Z',
      '2026-11-01T08:00:00.000Z',
    ]);
  });

  it('refuses a bad expression, a wrong number of fields and an unknown time zone, naming the schedule, its step and the expression', () => {
    const cases: [string, string | undefined, RegExp][] = [
      ['61 * * * *', undefined, /minute/],
      ['* * * *', undefined, /4 fields/],
      ['* * * * * * *', undefined, /7 fields/],
      ['not a cron', undefined, /3 fields/],
      ['0 3 * * *', 'Mars/Olympus_Mons', /time zone "Mars\/Olympus_Mons" is unknown/],
    ];
    for (const [cron, timezone, problem] of cases) {
      let caught: unknown;
      try {
        compile(cron, timezone);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(InvalidScheduleError);
      const err = caught as InvalidScheduleError;
      expect(err.code).toBe('invalid_schedule');
      expect(err.message).toContain(`Schedule "nightly" of step "report" (cron "${cron}")`);
      expect(err.message).toMatch(problem);
    }
  });
});
