import { Inject, Injectable, Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { CYCLONE_SCHEDULER, RETENTION_BATCH, RETENTION_INTERVAL_MS } from '../cyclone.constants.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { DELETE_EXPIRED_RATE_BUCKETS, DELETE_EXPIRED_RUNS } from '../sql/retention.sql.js';
import { Loop } from '../common/loop.js';
import type { MaintenanceService } from './maintenance-service.js';

/**
 * Deletes finished runs past their retention, and rate-limit buckets past
 * their window, on every client; replicas share the work.
 */
@Injectable()
export class RetentionSweeper implements MaintenanceService {
  private readonly logger = new Logger('Cyclone');
  readonly loop: Loop;
  readonly runsAtStartup = false;

  constructor(
    private readonly database: CycloneDatabase,
    @Inject(CYCLONE_SCHEDULER) scheduler: SchedulerRegistry,
  ) {
    // Spread replicas' sweeps apart rather than all on the minute.
    this.loop = new Loop(
      'cyclone:retention',
      () => RETENTION_INTERVAL_MS * (0.75 + Math.random() / 2),
      async () => void (await this.sweep()),
      scheduler,
      (err) => this.database.covers(err),
    );
  }

  /** Deletes expired runs in batches until none is left; returns how many. */
  async sweep(): Promise<number> {
    let total = 0;
    for (;;) {
      const { rows } = await this.database.query(DELETE_EXPIRED_RUNS, [RETENTION_BATCH]);
      total += rows[0].runs;
      if (rows[0].runs < RETENTION_BATCH) break;
    }
    if (total > 0) this.logger.log(`Retention: deleted ${total} finished run(s)`);
    while ((await this.database.query(DELETE_EXPIRED_RATE_BUCKETS, [RETENTION_BATCH])).rowCount === RETENTION_BATCH);
    return total;
  }
}
