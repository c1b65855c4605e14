import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { InvalidInputError } from '../errors/invalid-input.error.js';
import { messages } from '../cyclone.messages.js';

export function checkInteger(value: unknown, name: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidOptionError(messages.invalidInteger(name, value, min, max));
  }
  return value;
}

export function checkName(value: unknown, name: string): string {
  if (typeof value !== 'string' || value.trim().length === 0 || value.length > 200) {
    throw new InvalidOptionError(messages.invalidString(name, value));
  }
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
 * Serialises a value to JSON text, refusing what would silently change on the
 * way (functions, symbols, bigints, cycles, non-finite numbers) and what is over
 * the size limit. `undefined` is stored as null.
 */
export function toJson(value: unknown, what: string, maxBytes: number): string {
  const problem = findUnserialisable(value, new Set());
  if (problem) throw new InvalidInputError(messages.notSerialisable(what, problem));
  const text = JSON.stringify(value) ?? 'null';
  const bytes = Buffer.byteLength(text);
  if (bytes > maxBytes) throw new InvalidInputError(messages.tooLarge(what, bytes, maxBytes));
  return text;
}

function findUnserialisable(value: unknown, seen: Set<object>, path = '$'): string | undefined {
  switch (typeof value) {
    case 'function':
    case 'symbol':
      return `${path} is a ${typeof value}`;
    case 'bigint':
      return `${path} is a bigint; send it as a string`;
    case 'number':
      return Number.isFinite(value) ? undefined : `${path} is ${value}`;
    case 'string':
      return unstorable(value, `${path} contains`);
    case 'object': {
      if (value === null) return undefined;
      if (seen.has(value)) return `${path} refers back to itself`;
      if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return undefined;
      // JSON.stringify turns these into {} and loses every entry.
      if (value instanceof Map || value instanceof Set) {
        return `${path} is a ${value instanceof Map ? 'Map' : 'Set'}; convert it to an object or array`;
      }
      seen.add(value);
      const entries = Array.isArray(value) ? value.entries() : Object.entries(value);
      for (const [key, child] of entries) {
        const badKey = unstorable(String(key), `${path} has a key with`);
        if (badKey) return badKey;
        const problem = findUnserialisable(child, seen, `${path}.${key}`);
        if (problem) return problem;
      }
      seen.delete(value);
      return undefined;
    }
    default:
      return undefined;
  }
}

/** A lone UTF-16 surrogate: half of a character such as an emoji, cut by slicing a string. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Text that JSON can carry but PostgreSQL's jsonb refuses. */
function unstorable(text: string, where: string): string | undefined {
  if (text.includes('\u0000')) return `${where} a NUL character (\\u0000), which PostgreSQL cannot store`;
  if (LONE_SURROGATE.test(text)) {
    return `${where} half of a character (a lone UTF-16 surrogate, e.g. an emoji cut by slice), which PostgreSQL cannot store`;
  }
  return undefined;
}
