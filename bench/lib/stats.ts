/** Small statistics helpers for the benchmark. */

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  // Nearest-rank: the smallest value with at least p% of the values at or below it.
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1];
}

export function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export interface Spread {
  median: number;
  min: number;
  max: number;
  n: number;
  values: number[];
}

export function spread(values: number[]): Spread {
  const finite = values.filter((v) => Number.isFinite(v));
  return {
    median: median(finite),
    min: finite.length ? Math.min(...finite) : NaN,
    max: finite.length ? Math.max(...finite) : NaN,
    n: finite.length,
    values,
  };
}

/** Formats a number with a sensible number of significant digits. */
export function fmt(value: number, digits = 3): string {
  if (!Number.isFinite(value)) return 'n/a';
  const abs = Math.abs(value);
  if (abs >= 100) return Math.round(value).toLocaleString('en-US');
  if (abs >= 10) return value.toFixed(1);
  if (abs >= 1) return value.toFixed(Math.max(0, digits - 1));
  return value.toPrecision(digits);
}

/** "median [min–max]", or just the value when there was one repetition. */
export function fmtSpread(s: Spread | undefined): string {
  if (!s || s.n === 0) return 'n/a';
  if (s.n === 1) return fmt(s.median);
  return `${fmt(s.median)} [${fmt(s.min)}–${fmt(s.max)}]`;
}

export function ratio(a: number, b: number): string {
  if (!Number.isFinite(a) || !Number.isFinite(b) || b === 0) return 'n/a';
  return `${(a / b).toFixed(2)}×`;
}
