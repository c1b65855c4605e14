import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { CycloneClient } from '../client/cyclone.client.js';
import { WakePublisher } from '../client/wake-publisher.js';
import { CYCLONE_OPTIONS, CYCLONE_SCHEDULER } from '../cyclone.constants.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { createCycloneDatabase } from '../database/database.factory.js';
import type { CycloneModuleOptions } from '../interfaces/cyclone-module-options.interface.js';
import { RecoverySweeper } from '../maintenance/recovery.sweeper.js';
import { RetentionSweeper } from '../maintenance/retention.sweeper.js';
import { StepExplorer } from '../steps/step.explorer.js';
import { StepRegistry } from '../steps/step-registry.js';
import { NotificationListener } from '../worker/notification-listener.js';
import { WorkerHost } from '../worker/worker-host.js';
import { WorkflowRegistry } from '../workflow/workflow-registry.js';
import { TimerSweeper } from '../maintenance/timer.sweeper.js';
import { CYCLONE_MODULE_OPTIONS, CycloneConfigurableModule } from './cyclone.module-definition.js';
import { resolveOptions, type ResolvedOptions } from './resolved-options.js';

/**
 * Durable jobs in the app's PostgreSQL. `CycloneModule.forRoot(options)` or
 * `forRootAsync({ imports, inject, useFactory })`; global by default, so
 * `CycloneClient` can be injected anywhere.
 *
 * It does not import `ScheduleModule.forRoot()`: a second copy would run the
 * app's own cron jobs twice. Its loops register in the app's SchedulerRegistry
 * when the app has one, and in a private one otherwise.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    {
      provide: CYCLONE_OPTIONS,
      useFactory: (options: CycloneModuleOptions) => resolveOptions(options),
      inject: [CYCLONE_MODULE_OPTIONS],
    },
    {
      provide: CycloneDatabase,
      useFactory: (options: ResolvedOptions) => createCycloneDatabase(options),
      inject: [CYCLONE_OPTIONS],
    },
    {
      provide: CYCLONE_SCHEDULER,
      useFactory: (registry?: SchedulerRegistry) => registry ?? new SchedulerRegistry(),
      inject: [{ token: SchedulerRegistry, optional: true }],
    },
    StepRegistry,
    StepExplorer,
    WorkflowRegistry,
    TimerSweeper,
    NotificationListener,
    CycloneClient,
    WakePublisher,
    WorkerHost,
    RetentionSweeper,
    RecoverySweeper,
  ],
  exports: [
    CycloneClient,
    CycloneDatabase,
    StepRegistry,
    WorkerHost,
    NotificationListener,
    RetentionSweeper,
    RecoverySweeper,
    TimerSweeper,
    CYCLONE_OPTIONS,
  ],
})
export class CycloneModule extends CycloneConfigurableModule {}
