import { Controller, Get, Res } from '@nestjs/common';
import { CycloneMetrics } from 'cyclone-nestjs/metrics';

/** Prometheus scrapes this: Cyclone's metrics (and anything else in the registry). */
@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: CycloneMetrics) {}

  @Get()
  async scrape(@Res({ passthrough: true }) res: { setHeader(name: string, value: string): void }): Promise<string> {
    res.setHeader('Content-Type', this.metrics.contentType);
    return this.metrics.metrics();
  }
}
