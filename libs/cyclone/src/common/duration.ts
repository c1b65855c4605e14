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
    if (Number.isFinite(value) && value >= 0) return Math.round(value);
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
    if (text.length > 0 && consumed === text.length) return Math.round(total);
  }
  throw new InvalidOptionError(messages.invalidDuration(name, value));
}

/** `toMs` for optional options. */
export function optionalMs(value: Duration | undefined, name: string): number | undefined {
  return value === undefined ? undefined : toMs(value, name);
}
