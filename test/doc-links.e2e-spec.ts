import { describe, expect, it } from '@jest/globals';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { anchorsOf, linkTargets } from './support/markdown.js';

/**
 * The front page and the pages behind it: every relative link (and in-page
 * anchor) of README.md, docs/*.md and bench/README.md resolves, the front
 * page stays a page, and its table of contents reaches every page of docs/.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const FRONT_PAGE_LINES = 300;

function pages(root: string): string[] {
  const docs = readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join(root, 'docs', f));
  return [join(root, 'README.md'), ...docs, join(root, 'bench', 'README.md')];
}

/** The links of `page` that lead nowhere, as `page: target (why)`. */
function brokenLinks(root: string, page: string): string[] {
  const broken: string[] = [];
  for (const target of linkTargets(readFileSync(page, 'utf8'))) {
    // Another scheme (https:, mailto:) or another host: not this repository's to check.
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue;
    const [path, anchor] = target.split('#', 2);
    const file = path === '' ? page : path.startsWith('/') ? join(root, decodeURI(path)) : resolve(dirname(page), decodeURI(path));
    const where = `${relative(root, page)}: ${target}`;
    if (!existsSync(file)) broken.push(`${where} (no such file)`);
    else if (anchor !== undefined) {
      if (statSync(file).isDirectory() || !file.endsWith('.md')) broken.push(`${where} (an anchor into a page that is not Markdown)`);
      else if (!anchorsOf(readFileSync(file, 'utf8')).has(decodeURIComponent(anchor))) broken.push(`${where} (no such heading)`);
    }
  }
  return broken;
}

describe('the documentation', () => {
  it('has every relative link and anchor resolve', () => {
    const all = pages(ROOT);
    expect(all.length).toBeGreaterThan(10);
    expect(all.flatMap((page) => brokenLinks(ROOT, page))).toEqual([]);
  });

  it('has a front page of at most 300 lines whose table of contents reaches every page of docs/', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme.trimEnd().split('\n').length).toBeLessThanOrEqual(FRONT_PAGE_LINES);
    const linked = new Set(linkTargets(readme).map((target) => target.split('#')[0]));
    const unlinked = readdirSync(join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .filter((f) => !linked.has(`docs/${f}`));
    expect(unlinked).toEqual([]);
    expect(linked).toContain('bench/README.md');
  });

  it('finds a missing page, a missing heading and a missing image', () => {
    const root = mkdtempSync(join(tmpdir(), 'cyclone-docs-'));
    try {
      writeFileSync(join(root, 'target.md'), '# A title\n\n## Options (and `@Step` defaults)\n\n## Options (and `@Step` defaults)\n');
      writeFileSync(
        join(root, 'page.md'),
        [
          '# Page',
          '[fine](target.md#options-and-step-defaults) [repeated](target.md#options-and-step-defaults-1) [here](#page)',
          '[gone](missing.md) [no heading](target.md#nothing) ![picture](missing.png)',
          '[`code` in text](target.md#a-title) [web](https://example.com/missing)',
          '```md',
          '[in a code block](ignored.md)',
          '```',
        ].join('\n'),
      );
      expect(brokenLinks(root, join(root, 'page.md'))).toEqual([
        'page.md: missing.md (no such file)',
        'page.md: target.md#nothing (no such heading)',
        'page.md: missing.png (no such file)',
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
