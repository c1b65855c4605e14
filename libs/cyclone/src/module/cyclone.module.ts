import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { CycloneClient } from '../client/cyclone.client.js';
import { CYCLONE_OPTIONS, CYCLONE_SCHEDULER } from '../cyclone.constants.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { createCycloneDatabase } from './database.factory.js';
import { StepExplorer } from '../discovery/step.explorer.js';
import { StepEventExplorer } from '../discovery/step-event.explorer.js';
import { StepEventDispatcher } from '../events/step-event-dispatcher.js';
import type { CycloneModuleOptions } from '../options/cyclone-module-options.interface.js';
import { Maintainer } from '../maintenance/maintainer.js';
import { PartitionMaintainer } from '../maintenance/partition-maintainer.js';
import { RecoverySweeper } from '../maintenance/recovery.sweeper.js';
import { RetentionSweeper } from '../maintenance/retention.sweeper.js';
import { TimerSweeper } from '../maintenance/timer.sweeper.js';
import { MetricsSampler } from '../maintenance/metrics.sampler.js';
import { ScheduleTicker } from '../maintenance/schedule.ticker.js';
import { ScheduleRegistry } from '../schedules/schedule-registry.js';
import { FlowKeySweeper } from '../maintenance/flow-key.sweeper.js';
import { ClientPresenceMaintainer } from '../maintenance/client-presence.maintainer.js';
import { NotificationListener } from '../notifications/notification-listener.js';
import { WakePublisher } from '../notifications/wake-publisher.js';
import { CycloneStats } from '../runtime/cyclone-stats.js';
import { StepRegistry } from '../steps/step-registry.js';
import { WorkerHost } from '../worker/worker-host.js';
import { WorkflowRegistry } from '../workflow/workflow-registry.js';
import { CycloneInstance } from '../runtime/cyclone-instance.js';
import { WorkflowExplorer } from '../discovery/workflow.explorer.js';
import { CodeWorkflowRegistry } from '../workflow/code/code-workflow-registry.js';
import { WorkflowRunner } from '../workflow/code/workflow-runner.js';
import { CYCLONE_MODULE_OPTIONS, CycloneConfigurableModule } from './cyclone.module-definition.js';
import { resolveOptions, type ResolvedOptions } from '../options/resolved-options.js';
import { CycloneTracer } from '../tracing/cyclone-tracer.js';
import { DispatchService } from '../dispatch/dispatch.service.js';
import { LocalWorkers } from '../worker/local-workers.js';
import { createTracer } from '../tracing/create-tracer.js';

/**
 * Durable jobs in the app's PostgreSQL. `CycloneModule.forRoot(options)` or
 * `forRootAsync({ imports, inject, useFactory })`; global by default, so
 * `CycloneClient` can be injected anywhere.
 *
 * Lifecycle: the database opens (and migrates) while providers are made;
 * `@Step` handlers, workflows and `@Workflow` methods are registered in
 * `onModuleInit`; workers and maintenance loops start in
 * `onApplicationBootstrap`, once every module is ready; workers drain in
 * `onModuleDestroy`, while the database is still open; connections (and an
 * embedded server) close in `onApplicationShutdown`.
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
    {
      provide: CycloneStats,
      useFactory: (options: ResolvedOptions) => new CycloneStats(options.pollIntervalMs),
      inject: [CYCLONE_OPTIONS],
    },
    {
      provide: CycloneTracer,
      useFactory: (options: ResolvedOptions) => createTracer(options.tracing),
      inject: [CYCLONE_OPTIONS],
    },
    CycloneInstance,
    StepRegistry,
    StepExplorer,
    StepEventDispatcher,
    StepEventExplorer,
    WorkflowRegistry,
    CodeWorkflowRegistry,
    WorkflowRunner,
    WorkflowExplorer,
    NotificationListener,
    WakePublisher,
    CycloneClient,
    DispatchService,
    LocalWorkers,
    WorkerHost,
    RecoverySweeper,
    TimerSweeper,
    RetentionSweeper,
    PartitionMaintainer,
    MetricsSampler,
    ScheduleRegistry,
    ScheduleTicker,
    FlowKeySweeper,
    Maintainer,
    ClientPresenceMaintainer,
  ],
  // What apps call. The health and metrics modules read CycloneStats.
  exports: [CycloneClient, CycloneDatabase, CycloneStats],
})
export class CycloneModule extends CycloneConfigurableModule {}
