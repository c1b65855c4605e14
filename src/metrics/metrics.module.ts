import { Module, type DynamicModule } from '@nestjs/common';
import { CycloneMetricsModule } from 'cyclone-nestjs/metrics';
import { Registry } from 'prom-client';
import { MetricsController } from './metrics.controller.js';

@Module({})
export class MetricsModule {
  /** Cyclone's metrics in a registry of this app's own, so two apps in one process (the tests) each have theirs. */
  static register(): DynamicModule {
    return {
      module: MetricsModule,
      imports: [CycloneMetricsModule.forRoot({ registry: new Registry() })],
      controllers: [MetricsController],
    };
  }
}
