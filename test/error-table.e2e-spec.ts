import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { CYCLONE_ERROR_STATUS } from 'cyclone-nestjs';

/**
 * The error table of docs/errors.md lists every code an error class of the
 * library can carry, with the HTTP status CycloneErrorFilter answers it with.
 */
const ERRORS = new URL('../libs/cyclone/src/errors/', import.meta.url);
const PAGE = readFileSync(new URL('../docs/errors.md', import.meta.url), 'utf8');

function codesInSources(): string[] {
  const codes = new Set<string>();
  for (const file of readdirSync(ERRORS).filter((f) => f.endsWith('.error.ts'))) {
    const text = readFileSync(new URL(file, ERRORS), 'utf8');
    for (const [, code] of text.matchAll(/super\('([a-z_]+)'/g)) codes.add(code);
    // StepAbortedError: step_<reason> for each reason of its AbortReason type.
    const reasons = /type AbortReason = ([^;]+);/.exec(text)?.[1];
    for (const [, reason] of reasons?.matchAll(/'([a-z_]+)'/g) ?? []) codes.add(`step_${reason}`);
  }
  return [...codes].sort();
}

/** code → the table row's HTTP column, from the rows of the page's table. */
function table(): Map<string, string> {
  const rows = new Map<string, string>();
  for (const line of PAGE.split('\n').filter((l) => l.startsWith('| `'))) {
    const [codes, , http] = line.split('|').slice(1).map((cell) => cell.trim());
    for (const [, code] of codes.matchAll(/`([a-z_]+)`/g)) rows.set(code, http);
  }
  return rows;
}

describe("the documentation's error table", () => {
  it('lists every code the error classes carry, with the status the filter answers', () => {
    const rows = table();
    const codes = codesInSources();
    expect(codes).toContain('database_unavailable');
    expect(codes).toContain('outcome_unknown');
    expect(codes.filter((code) => !rows.has(code))).toEqual([]);
    for (const [code, status] of Object.entries(CYCLONE_ERROR_STATUS)) expect([code, rows.get(code)]).toEqual([code, String(status)]);
  });
});
