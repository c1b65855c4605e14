import { describe, it, expect } from '@jest/globals';
import { checkInteger, checkKnownKeys, checkName, toJson } from './validate.js';
import { InvalidInputError } from '../errors/invalid-input.error.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';

const LIMIT = 1024 * 1024;

function rejection(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

describe('toJson', () => {
  it('serialises plain data exactly as JSON.stringify does', () => {
    const value = { a: 1, b: 'two', c: [true, null, { d: 1.5 }], e: { f: { g: [] } } };
    expect(JSON.parse(toJson(value, 'input', LIMIT))).toEqual(value);
  });

  it('accepts Dates (as ISO strings) and nested objects containing them', () => {
    const when = new Date('2026-01-02T03:04:05.678Z');
    expect(JSON.parse(toJson({ when, nested: { list: [when] } }, 'input', LIMIT))).toEqual({
      when: '2026-01-02T03:04:05.678Z',
      nested: { list: ['2026-01-02T03:04:05.678Z'] },
    });
  });

  it('accepts the same object referenced twice (that is not a cycle)', () => {
    const shared = { x: 1 };
    expect(JSON.parse(toJson({ a: shared, b: [shared, shared] }, 'input', LIMIT))).toEqual({
      a: { x: 1 },
      b: [{ x: 1 }, { x: 1 }],
    });
  });

  it('refuses NUL characters in strings and keys, which jsonb cannot store, naming the path', () => {
    const inValue = rejection(() => toJson({ note: ['ok', 'a\u0000b'] }, 'input', LIMIT));
    expect(inValue).toBeInstanceOf(InvalidInputError);
    expect(inValue.message).toContain('$.note.1 contains a NUL character');
    const inKey = rejection(() => toJson({ nested: { ['k\u0000']: 1 } }, 'output', LIMIT));
    expect(inKey.message).toContain('$.nested has a key with a NUL character');
  });

  it('refuses half of a character (a lone surrogate, as left by slicing an emoji), naming the path', () => {
    const cut = '😀 ok'.slice(0, 1);
    const err = rejection(() => toJson({ list: ['fine 😀', cut] }, 'output', LIMIT));
    expect(err).toBeInstanceOf(InvalidInputError);
    expect(err.message).toContain('$.list.1 contains half of a character');
    expect(rejection(() => toJson({ [cut]: 1 }, 'input', LIMIT)).message).toContain('$ has a key with half of a character');
    // Whole characters, emoji included, pass.
    expect(JSON.parse(toJson({ note: '😀 shipped' }, 'input', LIMIT))).toEqual({ note: '😀 shipped' });
  });

  it('stores undefined as null', () => {
    expect(toJson(undefined, 'output', LIMIT)).toBe('null');
  });

  it.each([
    ['a function', () => 1, 'function'],
    ['a nested function', { a: { f: () => 1 } }, '$.a.f'],
    ['a symbol', Symbol('s'), 'symbol'],
    ['a symbol in an array', [1, Symbol('s')], '$.1'],
    ['a bigint', 10n, 'bigint'],
    ['a nested bigint', { amount: 10n }, '$.amount'],
    ['NaN', Number.NaN, 'NaN'],
    ['a nested NaN', { score: Number.NaN }, '$.score'],
    ['Infinity', { big: Number.POSITIVE_INFINITY }, 'Infinity'],
  ])('rejects %s with InvalidInputError that says where', (_label, value, where) => {
    const err = rejection(() => toJson(value, 'input', LIMIT));
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).code).toBe('invalid_input');
    expect(err.message).toContain(where);
  });

  it('rejects a cycle, also one deep inside', () => {
    const a: Record<string, unknown> = { name: 'a' };
    a.self = a;
    expect(() => toJson(a, 'input', LIMIT)).toThrow(InvalidInputError);
    const b: Record<string, unknown> = { list: [] };
    (b.list as unknown[]).push({ back: b });
    const err = rejection(() => toJson({ wrapper: b }, 'input', LIMIT));
    expect(err).toBeInstanceOf(InvalidInputError);
    expect(err.message).toContain('refers back');
  });

  it('names what was being serialised', () => {
    expect(rejection(() => toJson(() => 1, 'output of step x', LIMIT)).message).toContain('output of step x');
  });

  it('enforces the size limit in bytes of JSON, inclusive', () => {
    const value = { s: 'x'.repeat(100) };
    const bytes = Buffer.byteLength(JSON.stringify(value));
    expect(toJson(value, 'input', bytes)).toBe(JSON.stringify(value));
    const err = rejection(() => toJson(value, 'input', bytes - 1));
    expect(err).toBeInstanceOf(InvalidInputError);
    expect(err.message).toContain(String(bytes));
    expect(err.message).toContain('maxPayloadBytes');
  });

  it('stops measuring a value far over the limit and says how much it measured', () => {
    expect(rejection(() => toJson('x'.repeat(2_000), 'input', 1_024)).message).toContain('is at least 2002 bytes of JSON');
    const many = Array.from({ length: 1_000 }, (_, i) => `item ${i}`);
    expect(rejection(() => toJson(many, 'input', 100)).message).toMatch(/is at least 1\d\d bytes of JSON, over the limit of 100 bytes/);
  });

  it('counts bytes, not characters', () => {
    const value = 'é'.repeat(10); // 10 characters, 20 bytes, 22 with the quotes
    expect(() => toJson(value, 'input', 21)).toThrow(InvalidInputError);
    expect(toJson(value, 'input', 22)).toBe(JSON.stringify(value));
  });
});

describe('checkInteger', () => {
  it('returns integers inside the range', () => {
    expect(checkInteger(1, 'maxAttempts', 1, 10)).toBe(1);
    expect(checkInteger(10, 'maxAttempts', 1, 10)).toBe(10);
  });

  it.each([[0], [11], [1.5], [Number.NaN], ['3'], [null], [undefined]])('rejects %p naming the option', (value) => {
    const err = rejection(() => checkInteger(value, 'maxAttempts', 1, 10));
    expect(err).toBeInstanceOf(InvalidOptionError);
    expect(err.message).toContain('"maxAttempts"');
  });
});

describe('checkName', () => {
  it('accepts a non-empty string up to 200 characters', () => {
    expect(checkName('send_email', 'kind')).toBe('send_email');
    expect(checkName('q'.repeat(200), 'queue')).toHaveLength(200);
  });

  it.each([[''], ['   '], ['q'.repeat(201)], [5], [undefined]])('rejects %p', (value) => {
    expect(() => checkName(value, 'queue')).toThrow(InvalidOptionError);
  });
});

describe('checkKnownKeys', () => {
  it('accepts known keys and names an unknown one with the known list', () => {
    expect(() => checkKnownKeys('opts', { a: 1 }, ['a', 'b'])).not.toThrow();
    const err = rejection(() => checkKnownKeys('@Step options', { a: 1, retries: 3 }, ['a', 'b']));
    expect(err).toBeInstanceOf(InvalidOptionError);
    expect(err.message).toContain('"retries"');
    expect(err.message).toContain('@Step options');
    expect(err.message).toContain('a, b');
  });
});
