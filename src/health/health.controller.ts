import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import { CycloneHealthIndicator } from 'cyclone-nestjs/health';

@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly cyclone: CycloneHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.cyclone.isHealthy('cyclone', { maxQueueAge: '2m' })]);
  }
}
