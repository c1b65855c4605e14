import { describe, it, expect } from '@jest/globals';
import { defaultBackoff } from './retry-policy.js';

const HOUR = 3_600_000;

function samples(attempt: number, n = 400): number[] {
  return Array.from({ length: n }, () => defaultBackoff(attempt));
}

describe('defaultBackoff', () => {
  it('waits about one second after the first attempt (±10 %)', () => {
    for (const delay of samples(1)) {
      expect(delay).toBeGreaterThanOrEqual(900);
      expect(delay).toBeLessThanOrEqual(1_100);
    }
  });

  it('doubles with each attempt, within the jitter', () => {
    for (let attempt = 1; attempt <= 10; attempt++) {
      const base = 1_000 * 2 ** (attempt - 1);
      for (const delay of samples(attempt, 50)) {
        expect(delay).toBeGreaterThanOrEqual(Math.floor(base * 0.9));
        expect(delay).toBeLessThanOrEqual(Math.ceil(base * 1.1));
      }
    }
  });

  it('is capped near one hour however many attempts have failed', () => {
    for (const attempt of [13, 20, 50, 1_000, 5_000]) {
      for (const delay of samples(attempt, 50)) {
        expect(Number.isFinite(delay)).toBe(true);
        expect(delay).toBeGreaterThanOrEqual(HOUR * 0.9);
        expect(delay).toBeLessThanOrEqual(HOUR * 1.1);
      }
    }
    // Attempt 12 (2048 s) is the last one below the cap: the cap does not cut in early.
    for (const delay of samples(12, 50)) {
      expect(delay).toBeGreaterThanOrEqual(2_048_000 * 0.9);
      expect(delay).toBeLessThanOrEqual(2_048_000 * 1.1);
    }
  });

  it('spreads retries of jobs that failed together (jitter on both sides)', () => {
    const delays = samples(3, 500);
    expect(new Set(delays).size).toBeGreaterThan(50);
    expect(Math.min(...delays)).toBeLessThan(4_000);
    expect(Math.max(...delays)).toBeGreaterThan(4_000);
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(3_600);
    expect(Math.max(...delays)).toBeLessThanOrEqual(4_400);
  });

  it('returns whole milliseconds', () => {
    for (const delay of samples(4, 100)) expect(Number.isInteger(delay)).toBe(true);
  });

  it('treats an attempt number below 1 as the first', () => {
    for (const delay of [...samples(0, 50), ...samples(-3, 50)]) {
      expect(delay).toBeGreaterThanOrEqual(900);
      expect(delay).toBeLessThanOrEqual(1_100);
    }
  });
});
