import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { messages } from '../cyclone.messages.js';

/** Milliseconds, or a string such as `'250ms'`, `'30s'`, `'5m'`, `'2h'`, `'1d'`, or `'1h30m'`. */
export type Duration = number | string;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;

/**
 * Turns a duration option into whole milliseconds, naming the option in the
 * error so the caller knows which argument to fix.
 */
export function toMs(value: Duration, name: string): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value) && value >= 0) return withinRange(Math.round(value), name, value);
    throw new InvalidOptionError(messages.invalidDuration(name, value));
  }
  if (typeof value === 'string') {
    const text = value.trim();
    let total = 0;
    let consumed = 0;
    PART.lastIndex = 0;
    for (let m = PART.exec(text); m; m = PART.exec(text)) {
      total += Number(m[1]) * UNIT_MS[m[2]];
      consumed = PART.lastIndex;
    }
    if (text.length > 0 && consumed === text.length) return withinRange(Math.round(total), name, value);
  }
  throw new InvalidOptionError(messages.invalidDuration(name, value));
}

/**
 * The longest duration accepted: 100 years. Longer ones overflow the
 * database's interval and timestamp types and would fail as raw SQL errors.
 */
export const MAX_DURATION_MS = 100 * 365 * 86_400_000;

function withinRange(ms: number, name: string, value: Duration): number {
  if (ms > MAX_DURATION_MS) throw new InvalidOptionError(messages.durationTooLong(name, value, MAX_DURATION_MS));
  return ms;
}

/** `toMs` for optional options. */
export function optionalMs(value: Duration | undefined, name: string): number | undefined {
  return value === undefined ? undefined : toMs(value, name);
}

/** `optionalMs` for durations where zero makes no sense, such as a timeout. */
export function optionalPositiveMs(value: Duration | undefined, name: string): number | undefined {
  const ms = optionalMs(value, name);
  if (ms === 0) throw new InvalidOptionError(messages.zeroDuration(name));
  return ms;
}
