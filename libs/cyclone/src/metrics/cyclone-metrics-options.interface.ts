import type { Duration } from '../common/duration.js';

/**
 * A prom-client `Registry` (`new Registry()`, or prom-client's `register`).
 * Declared by its shape, so that the types of `cyclone-nestjs/metrics`
 * compile without prom-client; at run time the module needs it installed.
 */
export interface PrometheusRegistry {
  metrics(): Promise<string>;
  readonly contentType: string;
  getSingleMetric(name: string): unknown;
  removeSingleMetric(name: string): void;
  registerMetric(metric: any): void;
}

export interface CycloneMetricsOptions {
  /** Where the metrics are registered. Default: prom-client's default registry (`register`). */
  registry?: PrometheusRegistry;
  /** Prefix of every metric name. Default `cyclone_`. */
  prefix?: string;
  /** How often the queue gauges are read from the database. Default 15 s. */
  sampleInterval?: Duration;
}
