import { InvalidInputError } from '../errors/invalid-input.error.js';
import { messages } from '../cyclone.messages.js';
import { errorMessage } from './error-message.js';
import { unstorableText } from './storable-text.js';

/**
 * Deepest nesting accepted. PostgreSQL parses JSON recursively and refuses a
 * document once its parser runs out of stack (about 10,000 levels at the
 * default max_stack_depth of 2 MB, fewer with a smaller one); far below
 * that, no real payload is this deep.
 */
export const MAX_JSON_DEPTH = 1_000;

/** Why a value cannot be written, and where in it. */
class Unwritable extends Error {
  constructor(
    readonly reason: string,
    readonly thrown?: unknown,
  ) {
    super(reason);
  }
}

/** The payload grew past the limit before it was finished: it is at least `bytes` long. */
class TooLarge extends Error {
  constructor(readonly bytes: number) {
    super('too large');
  }
}

/** A container being written: its source, what is left of it, and whether it is an array. */
interface Frame {
  source: object;
  array: boolean;
  keys: string[] | null;
  length: number;
  index: number;
  written: number;
}

/**
 * Serialises a value to JSON text as JSON.stringify does (toJSON is called,
 * undefined in an object is left out and in an array is null), in one
 * iterative pass that stops at what jsonb refuses or what would silently
 * change on the way: functions, symbols, bigints, non-finite numbers, Maps
 * and Sets, cycles, NUL characters and lone surrogates in strings and keys,
 * nesting deeper than MAX_JSON_DEPTH, and more than `maxBytes` of text. The
 * value is read exactly once: what a toJSON, getter or proxy returns is what
 * is checked and what is written, and if one of them throws, that is an
 * InvalidInputError naming the place. `undefined` is stored as null.
 */
export function toJson(value: unknown, what: string, maxBytes: number): string {
  let text: string;
  const writer = new JsonWriter(maxBytes);
  try {
    text = writer.write(value);
  } catch (err) {
    if (err instanceof Unwritable) {
      throw new InvalidInputError(messages.notSerialisable(what, err.reason), err.thrown);
    }
    if (err instanceof TooLarge) {
      throw new InvalidInputError(messages.tooLarge(what, err.bytes, maxBytes, true));
    }
    throw err;
  }
  const bytes = Buffer.byteLength(text);
  if (bytes > maxBytes) throw new InvalidInputError(messages.tooLarge(what, bytes, maxBytes));
  return text;
}

class JsonWriter {
  private readonly stack: Frame[] = [];
  /** The objects on the path being written, to tell a cycle from an object met twice. */
  private readonly onPath = new Set<object>();
  private out = '';

  constructor(private readonly maxBytes: number) {}

  write(root: unknown): string {
    this.open(this.resolve(root, ''));
    while (this.stack.length > 0) {
      const frame = this.stack[this.stack.length - 1];
      if (frame.index >= frame.length) {
        this.out += frame.array ? ']' : '}';
        this.stack.pop();
        this.onPath.delete(frame.source);
        continue;
      }
      const index = frame.index++;
      const key = frame.array ? index : frame.keys![index];
      let child: unknown;
      try {
        child = (frame.source as Record<string | number, unknown>)[key];
      } catch (err) {
        throw this.threw('reading it threw', err);
      }
      if (child !== null && (typeof child === 'object' || typeof child === 'function')) child = this.resolve(child, key);
      if (!frame.array && child === undefined) continue;
      if (frame.written++ > 0) this.out += ',';
      if (!frame.array) this.out += `${this.quote(key as string, true)}:`;
      this.open(child);
      if (this.out.length > this.maxBytes) throw new TooLarge(this.out.length);
    }
    return this.out;
  }

  /** Writes a primitive, or opens a container and pushes it. */
  private open(value: unknown): void {
    switch (typeof value) {
      case 'string':
        this.out += this.quote(value, false);
        return;
      case 'number':
        if (!Number.isFinite(value)) throw this.problem(`is ${value}`);
        this.out += String(value);
        return;
      case 'boolean':
        this.out += value ? 'true' : 'false';
        return;
      case 'undefined':
        this.out += 'null';
        return;
      case 'bigint':
        throw this.problem('is a bigint; send it as a string');
      case 'function':
      case 'symbol':
        throw this.problem(`is a ${typeof value}`);
    }
    if (value === null) {
      this.out += 'null';
      return;
    }
    const source = value as object;
    if (this.onPath.has(source)) throw this.problem('refers back to itself');
    if (this.stack.length >= MAX_JSON_DEPTH) throw new Unwritable(messages.tooDeep(this.path(), MAX_JSON_DEPTH));
    const frame: Frame = { source, array: false, keys: null, length: 0, index: 0, written: 0 };
    try {
      // JSON.stringify turns these into {} and loses every entry.
      if (source instanceof Map) throw this.problem('is a Map; convert it to an object or array');
      if (source instanceof Set) throw this.problem('is a Set; convert it to an object or array');
      frame.array = Array.isArray(source);
      if (frame.array) {
        const length = (source as unknown[]).length;
        frame.length = typeof length === 'number' && length > 0 ? length : 0;
      } else {
        frame.keys = Object.keys(source);
        frame.length = frame.keys.length;
      }
    } catch (err) {
      // A proxy's trap or a getter threw.
      if (err instanceof Unwritable) throw err;
      throw this.threw('reading it threw', err);
    }
    this.out += frame.array ? '[' : '{';
    this.onPath.add(source);
    this.stack.push(frame);
  }

  /** What JSON.stringify would write for `value` under `key`: its toJSON's result, a boxed primitive's value. */
  private resolve(value: unknown, key: string | number): unknown {
    if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return value;
    let toJSON: unknown;
    try {
      toJSON = (value as { toJSON?: unknown }).toJSON;
    } catch (err) {
      throw this.threw('reading its toJSON threw', err);
    }
    if (typeof toJSON === 'function') {
      try {
        value = toJSON.call(value, String(key));
      } catch (err) {
        throw this.threw('its toJSON() threw', err);
      }
      if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return value;
    }
    try {
      if (value instanceof Number) return Number.prototype.valueOf.call(value);
      if (value instanceof String) return String.prototype.valueOf.call(value);
      if (value instanceof Boolean) return Boolean.prototype.valueOf.call(value);
    } catch (err) {
      throw this.threw('reading it threw', err);
    }
    return value;
  }

  private quote(text: string, isKey: boolean): string {
    // Every character is at least a byte: one this long is over the limit before it is escaped.
    if (text.length > this.maxBytes) throw new TooLarge(this.out.length + text.length + 2);
    const problem = unstorableText(text);
    if (problem) {
      throw isKey ? new Unwritable(`${this.path(true)} has a key with ${problem}`) : this.problem(`contains ${problem}`);
    }
    return JSON.stringify(text);
  }

  private problem(what: string): Unwritable {
    return new Unwritable(`${this.path()} ${what}`);
  }

  /** Something the caller's code (a getter, a proxy trap, toJSON) threw at the value being written. */
  private threw(what: string, err: unknown): Unwritable {
    return new Unwritable(`${this.path()}: ${what}: ${errorMessage(err)}`, err);
  }

  /**
   * `$`, then `.key` for each level down to the value being written (with
   * `container`, down to the container whose key is being written).
   */
  private path(container = false): string {
    let path = '$';
    const depth = container ? this.stack.length - 1 : this.stack.length;
    for (let i = 0; i < depth; i++) {
      const frame = this.stack[i];
      const index = frame.index - 1;
      path += `.${frame.array ? index : frame.keys![index]}`;
    }
    return path;
  }
}
