import { Module, type DynamicModule } from '@nestjs/common';
import { CycloneStats } from '../runtime/cyclone-stats.js';
import type { CycloneMetricsOptions } from './cyclone-metrics-options.interface.js';
import { CycloneMetrics, resolveMetricsOptions } from './cyclone-metrics.js';

/**
 * Cyclone's Prometheus metrics, through prom-client (an optional peer:
 * `npm install prom-client`). Import it beside `CycloneModule.forRoot(...)`;
 * it registers the metrics in the given registry (default prom-client's
 * default one) and provides `CycloneMetrics`, whose `metrics()` a `/metrics`
 * route returns. The metrics leave the registry when the app closes.
 *
 * `forRoot` checks its options and loads prom-client at once, so a typo or
 * a missing package fails where the app's modules are defined.
 */
@Module({})
export class CycloneMetricsModule {
  static forRoot(options: CycloneMetricsOptions = {}): DynamicModule {
    const resolved = resolveMetricsOptions(options);
    return {
      module: CycloneMetricsModule,
      providers: [
        {
          provide: CycloneMetrics,
          useFactory: (stats: CycloneStats) => CycloneMetrics.create(resolved, stats),
          inject: [CycloneStats],
        },
      ],
      exports: [CycloneMetrics],
    };
  }
}
