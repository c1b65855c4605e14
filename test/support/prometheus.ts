import type { Registry } from 'prom-client';

/** One scrape of a registry, as Prometheus reads it: series by name and labels. */
export interface Scrape {
  /** The value of the series with exactly these labels, or undefined when there is none. */
  value(name: string, labels?: Record<string, string>): number | undefined;
  /** Every series of a name. */
  series(name: string): { labels: Record<string, string>; value: number }[];
  readonly text: string;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Scrapes the registry's text exposition (what `GET /metrics` serves) and parses it. */
export async function scrape(registry: Registry): Promise<Scrape> {
  return parseExposition(await registry.metrics());
}

export function parseExposition(text: string): Scrape {
  const all: { name: string; labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const match = LINE.exec(line);
    if (!match) throw new Error(`Not an exposition line: ${line}`);
    const labels = Object.fromEntries([...(match[2] ?? '').matchAll(LABEL)].map((m) => [m[1], m[2]]));
    all.push({ name: match[1], labels, value: Number(match[3]) });
  }
  const same = (a: Record<string, string>, b: Record<string, string>) =>
    Object.keys(a).length === Object.keys(b).length && Object.entries(b).every(([k, v]) => a[k] === v);
  return {
    text,
    value: (name, labels = {}) => all.find((s) => s.name === name && same(s.labels, labels))?.value,
    series: (name) => all.filter((s) => s.name === name).map(({ labels, value }) => ({ labels, value })),
  };
}
