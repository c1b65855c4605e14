import { Module } from '@nestjs/common';
import { CycloneMetricsModule } from 'cyclone-nestjs/metrics';
import { MetricsController } from './metrics.controller.js';

@Module({ imports: [CycloneMetricsModule.forRoot()], controllers: [MetricsController] })
export class MetricsModule {}
