import { Inject, Injectable, Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { CYCLONE_OPTIONS, CYCLONE_SCHEDULER, PARTITION_INTERVAL_MS } from '../cyclone.constants.js';
import { Loop } from '../common/loop.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import { CycloneStats } from '../runtime/cyclone-stats.js';
import { DROP_PARTITIONS, ENSURE_PARTITIONS, LIST_PARTITIONS } from '../sql/partitions.sql.js';
import type { MaintenanceService } from './maintenance-service.js';

/** What one pass did. */
export interface PartitionPass {
  created: number;
  dropped: string[];
  /** Months old enough to drop that still hold a run unfinished or within its retention. */
  kept: string[];
}

/**
 * Keeps the monthly partitions of runs and steps: creates them months
 * ahead, and drops whole months once every run in them is finished and
 * past its retention (`partitions.dropAfter` after the month ended). Every
 * client runs it every 6 hours; the SQL functions take an advisory lock, so
 * replicas calling together do the work once. The partitions of the next
 * months already exist when the client starts (the database factory
 * ensures them before the first insert).
 */
@Injectable()
export class PartitionMaintainer implements MaintenanceService {
  private readonly logger = new Logger('Cyclone');
  readonly loop: Loop;
  readonly runsAtStartup = true;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly stats: CycloneStats,
    @Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(CYCLONE_SCHEDULER) scheduler: SchedulerRegistry,
  ) {
    // Spread replicas apart rather than all at once.
    this.loop = new Loop(
      'cyclone:partitions',
      () => PARTITION_INTERVAL_MS * (0.9 + Math.random() / 5),
      async () => void (await this.maintain()),
      scheduler,
      (err) => this.database.covers(err),
    );
  }

  async maintain(): Promise<PartitionPass> {
    const { rows } = await this.database.query(ENSURE_PARTITIONS, [this.options.partitionMonthsAhead]);
    const created = rows[0].created;
    if (created > 0) this.logger.log(`Partitions: created ${created} month(s) ahead`);
    const dropAfterMs = this.options.partitionDropAfterMs;
    if (dropAfterMs === null) return { created, dropped: [], kept: [] };

    const dropped = (await this.database.query(DROP_PARTITIONS, [dropAfterMs])).rows.map((r) => r.name);
    if (dropped.length > 0) this.logger.log(`Partitions: dropped ${dropped.join(', ')}`);
    const kept = (await this.database.query(LIST_PARTITIONS, [dropAfterMs])).rows
      .filter((p) => p.ended_before && p.live_runs)
      .map((p) => p.name);
    const newlyKept = kept.filter((name) => !this.stats.keptPartitions.includes(name));
    if (newlyKept.length > 0) {
      this.logger.warn(
        `Partitions: kept ${newlyKept.join(', ')}: old enough to drop, but a run in each is unfinished or within its retention`,
      );
    }
    this.stats.keptPartitions = kept;
    return { created, dropped, kept };
  }
}
