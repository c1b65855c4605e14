import { Module, type DynamicModule } from '@nestjs/common';
import { APP_FILTER, APP_PIPE } from '@nestjs/core';
import { CycloneErrorFilter, CycloneModule } from 'cyclone-nestjs';
import { CycloneDashboardModule } from 'cyclone-nestjs/dashboard';
import { CheckoutModule } from './checkout/checkout.module.js';
import { AppValidationPipe } from './common/app-validation.pipe.js';
import { dashboardAuthGuard } from './dashboard/dashboard-auth.guard.js';
import { dashboardCredentials, dashboardReadOnly } from './dashboard/dashboard-credentials.js';
import { DatabaseModule } from './database/database.module.js';
import { EmailsModule } from './emails/emails.module.js';
import { ExportsModule } from './exports/exports.module.js';
import { HealthModule } from './health/health.module.js';
import { MetricsModule } from './metrics/metrics.module.js';
import { OnboardingModule } from './onboarding/onboarding.module.js';
import { Onboarding } from './onboarding/onboarding.workflow.js';
import { OrdersModule } from './orders/orders.module.js';
import { ReportsModule } from './reports/reports.module.js';
import { UsersModule } from './users/users.module.js';

@Module({})
export class AppModule {
  /**
   * The app as the environment configures it when it starts: the dashboard's
   * login and read-only switch are read here, timing and concurrency when
   * Cyclone starts, so each deployment (API, workers, tests) tunes them
   * without code changes.
   */
  static register(): DynamicModule {
    return {
      module: AppModule,
      imports: [
        CycloneModule.forRootAsync({
          useFactory: () => ({
            queues: {
              default: { workers: Number(process.env.CYCLONE_WORKERS ?? 10) },
              reports: { workers: Number(process.env.CYCLONE_REPORT_WORKERS ?? 2) },
              exports: { workers: Number(process.env.CYCLONE_EXPORT_WORKERS ?? 2) },
            },
            leaseTtl: process.env.CYCLONE_LEASE_TTL ?? '30s',
            runWorkers: process.env.CYCLONE_ROLE !== 'api',
            workflows: [Onboarding],
            // Broker dispatch (docs/dispatch.md) when a Redis is configured
            ...(process.env.CYCLONE_REDIS_URL ? { dispatch: { redis: { url: process.env.CYCLONE_REDIS_URL } } } : {}),
          }),
        }),
        // The dashboard at /cyclone, behind HTTP Basic; DASHBOARD_READONLY=true leaves out every action.
        // A worker-only process serves no HTTP, so it has none (and needs no login).
        ...(process.env.CYCLONE_ROLE === 'worker'
          ? []
          : [
              CycloneDashboardModule.forRoot({
                path: '/cyclone',
                guard: dashboardAuthGuard(dashboardCredentials()),
                readOnly: dashboardReadOnly(),
              }),
            ]),
        DatabaseModule,
        EmailsModule,
        ReportsModule,
        OnboardingModule,
        UsersModule,
        OrdersModule,
        CheckoutModule,
        ExportsModule,
        HealthModule,
        MetricsModule.register(),
      ],
      providers: [
        { provide: APP_FILTER, useClass: CycloneErrorFilter },
        { provide: APP_PIPE, useClass: AppValidationPipe },
      ],
    };
  }
}
