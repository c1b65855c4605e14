import { Injectable, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { CycloneInstance } from '../runtime/cyclone-instance.js';
import { CycloneStats } from '../runtime/cyclone-stats.js';
import { FlowKeySweeper } from './flow-key.sweeper.js';
import type { MaintenanceService } from './maintenance-service.js';
import { MetricsSampler } from './metrics.sampler.js';
import { PartitionMaintainer } from './partition-maintainer.js';
import { RecoverySweeper } from './recovery.sweeper.js';
import { RetentionSweeper } from './retention.sweeper.js';
import { ScheduleTicker } from './schedule.ticker.js';
import { TimerSweeper } from './timer.sweeper.js';

/**
 * Starts and stops the maintenance services' loops. Every client runs them,
 * enqueue-only ones too: recovery, timers, retention and partitions need no
 * leader, since each step they touch is settled under its run's lock and
 * re-checked, partitions change under an advisory lock, a schedule's tick
 * is claimed by one compare-and-set on its row, and metric samples only
 * read. A service that is not enabled is not started.
 */
@Injectable()
export class Maintainer implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly services: MaintenanceService[];
  private started = false;

  constructor(
    private readonly instance: CycloneInstance,
    private readonly stats: CycloneStats,
    recovery: RecoverySweeper,
    timers: TimerSweeper,
    retention: RetentionSweeper,
    partitions: PartitionMaintainer,
    metrics: MetricsSampler,
    schedules: ScheduleTicker,
    flowKeys: FlowKeySweeper,
  ) {
    this.services = [recovery, timers, retention, partitions, metrics, schedules, flowKeys];
  }

  onApplicationBootstrap(): void {
    if (!this.instance.isPrimary) return;
    this.started = true;
    for (const { loop, runsAtStartup, enabled } of this.services) {
      if (enabled === false) continue;
      this.stats.track(loop);
      loop.start(runsAtStartup ? 0 : undefined);
    }
  }

  async onModuleDestroy(): Promise<void> {
    if (!this.started) return;
    await Promise.all(this.services.map(({ loop }) => loop.stop()));
  }
}
