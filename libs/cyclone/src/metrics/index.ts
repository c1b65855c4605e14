export { CycloneMetricsModule } from './cyclone-metrics.module.js';
export { CycloneMetrics, DISPATCH_METRIC_NAMES, METRIC_NAMES } from './cyclone-metrics.js';
export type { CycloneMetricsOptions, PrometheusRegistry } from './cyclone-metrics-options.interface.js';
