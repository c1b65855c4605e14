import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';

/** The browser APIs that parse a string as HTML: a value from a job passed to one could become markup. */
const PARSES_HTML = /\b(innerHTML|outerHTML|insertAdjacentHTML|createContextualFragment|DOMParser|document\.write|srcdoc)\b/;

describe('the front end', () => {
  it('never parses HTML: every element is made with createElement and every value set as text (dom.ts)', () => {
    const dir = new URL('./', import.meta.url);
    const files = readdirSync(dir).filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'));
    expect(files).toEqual(expect.arrayContaining(['dom.ts', 'main.ts', 'page-run.ts']));
    const offenders = files.filter((file) => PARSES_HTML.test(readFileSync(new URL(file, dir), 'utf8')));
    expect(offenders).toEqual([]);
  });
});
