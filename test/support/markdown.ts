/**
 * Just enough Markdown reading for the documentation's tests: the links of a
 * page and the anchors GitHub gives its headings.
 */

/** The page without its fenced code blocks: what they hold is code, not links or headings. */
function prose(page: string): string {
  let inFence = false;
  return page
    .split('\n')
    .map((line) => {
      if (/^\s*(```|~~~)/.test(line)) {
        inFence = !inFence;
        return '';
      }
      return inFence ? '' : line;
    })
    .join('\n');
}

/** Every link target of the page: inline links and images, reference definitions, href and src attributes. */
export function linkTargets(page: string): string[] {
  // An inline code span may sit inside a link's text ([`enqueueTx`](…)); its content is never a link.
  const text = prose(page).replace(/`[^`\n]*`/g, 'code');
  const targets: string[] = [];
  for (const [, target] of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) targets.push(target);
  for (const [, target] of text.matchAll(/^\s*\[[^\]\n]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)) targets.push(target);
  for (const [, target] of text.matchAll(/\b(?:href|src)="([^"]+)"/g)) targets.push(target);
  return targets;
}

/** GitHub's anchor for a heading's text: lower case, punctuation but `-` and `_` dropped, spaces made `-`. */
export function headingAnchor(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a page offers: one per heading (a repeated one gets -1, -2, … as on GitHub) and any explicit id or name. */
export function anchorsOf(page: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const text = prose(page);
  for (const [, heading] of text.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = headingAnchor(heading);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  for (const [, id] of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(id);
  return anchors;
}
