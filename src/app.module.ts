import { Module, ValidationPipe } from '@nestjs/common';
import { APP_FILTER, APP_PIPE } from '@nestjs/core';
import { CycloneErrorFilter, CycloneModule } from 'cyclone-nestjs';
import { CycloneDashboardModule } from 'cyclone-nestjs/dashboard';
import { DashboardAuthGuard } from './dashboard/dashboard-auth.guard.js';
import { EmailsModule } from './emails/emails.module.js';
import { HealthModule } from './health/health.module.js';
import { MetricsModule } from './metrics/metrics.module.js';
import { OnboardingModule } from './onboarding/onboarding.module.js';
import { Onboarding } from './onboarding/onboarding.workflow.js';
import { ReportsModule } from './reports/reports.module.js';
import { UsersModule } from './users/users.module.js';

@Module({
  imports: [
    // Timing and concurrency come from the environment, so each deployment
    // (API, workers, tests) can tune them without code changes.
    CycloneModule.forRootAsync({
      useFactory: () => ({
        queues: {
          default: { workers: Number(process.env.CYCLONE_WORKERS ?? 10) },
          reports: { workers: Number(process.env.CYCLONE_REPORT_WORKERS ?? 2) },
        },
        leaseTtl: process.env.CYCLONE_LEASE_TTL ?? '30s',
        runWorkers: process.env.CYCLONE_ROLE !== 'api',
        workflows: [Onboarding],
      }),
    }),
    // The dashboard at /cyclone, behind HTTP Basic (DASHBOARD_USER / DASHBOARD_PASSWORD).
    CycloneDashboardModule.forRoot({ path: '/cyclone', guard: DashboardAuthGuard }),
    EmailsModule,
    ReportsModule,
    OnboardingModule,
    UsersModule,
    HealthModule,
    MetricsModule,
  ],
  providers: [
    { provide: APP_FILTER, useClass: CycloneErrorFilter },
    // Every request body is checked against its class: a bad one is a 400 saying what is wrong,
    // before it reaches a query or a job (a missing body, a wrong type, an 8 KB email address).
    { provide: APP_PIPE, useValue: new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true }) },
  ],
})
export class AppModule {}
