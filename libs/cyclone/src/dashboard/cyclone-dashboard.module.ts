import { Controller, Module, UseGuards, type CanActivate, type DynamicModule, type Type } from '@nestjs/common';
import { DashboardActionsController } from './dashboard-actions.controller.js';
import { DashboardApiController } from './dashboard-api.controller.js';
import { DashboardAssets } from './dashboard-assets.js';
import { DASHBOARD_OPTIONS } from './dashboard.constants.js';
import type { CycloneDashboardOptions } from './dashboard-options.interface.js';
import { DashboardPagesController } from './dashboard-pages.controller.js';
import { DashboardReader } from './dashboard-reader.js';
import { DashboardBulk } from './dashboard-bulk.js';
import { DashboardCsrfGuard } from './csrf.js';
import { resolveDashboardOptions } from './resolve-dashboard-options.js';

type Guard = Type<CanActivate> | CanActivate;

/**
 * Cyclone's dashboard, served by the app itself: pages for queues (with a
 * queue's throughput chart), runs, a run's graph and attempts, schedules and
 * the clients running now, their JSON API under `${path}/api`, and the
 * actions (retry, cancel, pause, resume, run now, and retry or cancel by
 * filter) unless `readOnly`. Import it beside
 * `CycloneModule.forRoot(...)`:
 *
 * ```ts
 * CycloneDashboardModule.forRoot({ path: '/cyclone', guard: AdminGuard })
 * ```
 *
 * It works through Nest's controllers, guards and HTTP adapter only, so it
 * runs on Express and Fastify alike and adds no HTTP package of its own.
 */
@Module({})
export class CycloneDashboardModule {
  /**
   * Throws DashboardUnguardedError without a `guard` unless
   * `allowUnauthenticated: true`, and InvalidOptionError for a bad option:
   * the app does not start with a dashboard open to anyone by mistake.
   */
  static forRoot(options: CycloneDashboardOptions = {}): DynamicModule {
    const resolved = resolveDashboardOptions(options);
    const guards = resolved.guard === null ? [] : [resolved.guard];
    const controllers = [
      mount(DashboardPagesController, resolved.path, guards),
      mount(DashboardApiController, resolved.path, guards),
      // A read-only dashboard has no action routes at all: a POST finds nothing to call.
      ...(resolved.readOnly ? [] : [mount(DashboardActionsController, resolved.path, [...guards, DashboardCsrfGuard])]),
    ];
    return {
      module: CycloneDashboardModule,
      imports: options.imports ?? [],
      controllers,
      providers: [
        { provide: DASHBOARD_OPTIONS, useValue: resolved },
        { provide: DashboardAssets, useFactory: () => DashboardAssets.load() },
        DashboardReader,
        DashboardBulk,
      ],
    };
  }
}

/**
 * The controller at the dashboard's path, behind its guards. Decorator
 * arguments are fixed when a class is declared, so each dashboard gets its
 * own subclass, decorated with its path and guards at runtime; the routes
 * are inherited.
 */
function mount<T extends Type>(base: T, path: string, guards: Guard[]): T {
  const controller = class extends base {};
  Object.defineProperty(controller, 'name', { value: base.name });
  Controller(path)(controller);
  if (guards.length > 0) UseGuards(...guards)(controller);
  return controller;
}
