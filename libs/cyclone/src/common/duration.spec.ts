import { describe, it, expect } from '@jest/globals';
import { optionalMs, toMs } from './duration.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { CycloneError } from '../errors/cyclone.error.js';

describe('toMs', () => {
  it('takes numbers as milliseconds, rounded to whole ones', () => {
    expect(toMs(0, 'x')).toBe(0);
    expect(toMs(250, 'x')).toBe(250);
    expect(toMs(1500.4, 'x')).toBe(1500);
    expect(toMs(1500.6, 'x')).toBe(1501);
  });

  it.each([
    ['250ms', 250],
    ['30s', 30_000],
    ['5m', 300_000],
    ['2h', 7_200_000],
    ['1d', 86_400_000],
    ['1h30m', 5_400_000],
    ['1m30s', 90_000],
    ['1.5s', 1_500],
    ['0s', 0],
    [' 30s ', 30_000],
  ])('parses %j as %d ms', (text, ms) => {
    expect(toMs(text, 'x')).toBe(ms);
  });

  it('does not confuse minutes with milliseconds', () => {
    expect(toMs('5m', 'x')).toBe(5 * 60_000);
    expect(toMs('5ms', 'x')).toBe(5);
  });

  it.each([
    [-1],
    [-0.5],
    [Number.NaN],
    [Number.POSITIVE_INFINITY],
    [Number.NEGATIVE_INFINITY],
    [''],
    ['   '],
    ['abc'],
    ['5 parsecs'],
    ['5parsecs'],
    ['-1s'],
    ['30'],
    ['s'],
    ['1h 30m'],
    ['30s!'],
    [null],
    [undefined],
    [{}],
    [[5]],
    [true],
  ])('rejects %p with InvalidOptionError', (value) => {
    expect(() => toMs(value as never, 'leaseTtl')).toThrow(InvalidOptionError);
  });

  it('names the option and the bad value in the error, with a stable code', () => {
    let caught: unknown;
    try {
      toMs('5 parsecs', 'pollInterval[0]');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(CycloneError);
    expect((caught as CycloneError).code).toBe('invalid_option');
    expect((caught as Error).message).toContain('"pollInterval[0]"');
    expect((caught as Error).message).toContain('"5 parsecs"');
  });
});

describe('optionalMs', () => {
  it('passes undefined through and parses anything else', () => {
    expect(optionalMs(undefined, 'timeout')).toBeUndefined();
    expect(optionalMs('2s', 'timeout')).toBe(2_000);
    expect(() => optionalMs(-5, 'timeout')).toThrow(InvalidOptionError);
  });
});
