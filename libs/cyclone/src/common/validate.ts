import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { messages } from '../cyclone.messages.js';
import { errorMessage } from './error-message.js';
import { unstorableText } from './storable-text.js';

export { toJson, MAX_JSON_DEPTH } from './json-writer.js';

export function checkInteger(value: unknown, name: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidOptionError(messages.invalidInteger(name, value, min, max));
  }
  return value;
}

/**
 * The one check of every name Cyclone stores or matches on: kinds, queues,
 * unique keys, node ids, signal names, workflow names. PostgreSQL's text
 * refuses a NUL, and stores a lone UTF-16 surrogate as U+FFFD, which would
 * make distinct names collide and a queue's wake-ups never match it.
 */
export function checkName(value: unknown, name: string): string {
  if (typeof value !== 'string' || value.trim().length === 0 || value.length > 200) {
    throw new InvalidOptionError(messages.invalidString(name, value));
  }
  const problem = unstorableText(value);
  if (problem) throw new InvalidOptionError(messages.unstorableName(name, value, problem));
  return value;
}

/** A boolean option, or undefined when unset. */
export function checkBoolean(value: unknown, name: string): boolean | undefined {
  if (value === undefined || typeof value === 'boolean') return value;
  throw new InvalidOptionError(messages.invalidBoolean(name, value));
}

export function checkKnownKeys(where: string, value: object, known: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) throw new InvalidOptionError(messages.unknownOption(where, key, known));
  }
}

/**
 * The one check of an options argument: left out is `{}`; anything but a
 * plain object (null, a string, an array) is refused; an unknown key is
 * refused. Returns a plain copy of the known keys, read once, so a getter or
 * proxy that throws is an InvalidOptionError here and nothing later reads
 * the caller's object again.
 */
export function checkOptions<T extends object>(value: unknown, where: string, known: readonly string[]): T {
  if (value === undefined) return {} as T;
  let keys: string[];
  try {
    if (typeof value !== 'object' || value === null || !isRecord(value)) {
      throw new InvalidOptionError(messages.notAnOptionsObject(where, value));
    }
    keys = Object.keys(value);
  } catch (err) {
    if (err instanceof InvalidOptionError) throw err;
    // A proxy whose traps throw.
    throw new InvalidOptionError(messages.notAnOptionsObject(where, value), err);
  }
  const copy: Record<string, unknown> = {};
  for (const key of keys) {
    if (!known.includes(key)) throw new InvalidOptionError(messages.unknownOption(where, key, known));
    try {
      copy[key] = (value as Record<string, unknown>)[key];
    } catch (err) {
      throw new InvalidOptionError(messages.unreadableOption(where, key, errorMessage(err)), err);
    }
  }
  return copy as T;
}

/** An object that holds options as its own keys: not an array, nor a Map, Set, Date or boxed value, whose keys JSON ignores. */
function isRecord(value: object): boolean {
  return !(
    Array.isArray(value) ||
    value instanceof Map ||
    value instanceof Set ||
    value instanceof Date ||
    value instanceof RegExp ||
    value instanceof Promise ||
    value instanceof String ||
    value instanceof Number ||
    value instanceof Boolean
  );
}
