import { describe, it, expect } from '@jest/globals';
import { uuid7, uuid7Floor } from './uuid7.js';

const FORMAT = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('uuid7', () => {
  it('is a version 7, RFC 9562 variant UUID', () => {
    for (let i = 0; i < 1000; i++) expect(uuid7()).toMatch(FORMAT);
  });

  it('starts with the milliseconds it was made at, so ids sort by time', () => {
    const at = Date.UTC(2026, 10, 29, 12, 0, 0, 123);
    const id = uuid7(at);
    expect(parseInt(id.replace(/-/g, '').slice(0, 12), 16)).toBe(at);
    const later = [uuid7(at + 1), uuid7(at + 1_000), uuid7(at + 86_400_000)];
    expect([...later, id].sort()).toEqual([id, ...later]);
  });

  it('does not repeat, within a millisecond or across refills of its random pool', () => {
    const at = Date.now();
    const ids = new Set(Array.from({ length: 5_000 }, () => uuid7(at)));
    expect(ids.size).toBe(5_000);
  });

  it('uuid7Floor(ms) sorts below every id of that millisecond and above every id of the one before', () => {
    const at = Date.UTC(2026, 10, 29, 12, 0, 0, 123);
    const floor = uuid7Floor(at);
    expect(floor).toMatch(FORMAT);
    for (let i = 0; i < 1000; i++) {
      expect(uuid7(at) >= floor).toBe(true);
      expect(uuid7(at - 1) < floor).toBe(true);
    }
    expect(uuid7Floor(0)).toBe('00000000-0000-7000-8000-000000000000');
  });
});
