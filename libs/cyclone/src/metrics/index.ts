export { CycloneMetricsModule } from './cyclone-metrics.module.js';
export { CycloneMetrics, METRIC_NAMES } from './cyclone-metrics.js';
export type { CycloneMetricsOptions, PrometheusRegistry } from './cyclone-metrics-options.interface.js';
