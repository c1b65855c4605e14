import { Inject, Injectable } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { CYCLONE_SCHEDULER } from '../cyclone.constants.js';
import { Loop } from '../common/loop.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { CycloneStats, type ClusterSample } from '../runtime/cyclone-stats.js';
import { STRANDED_LEASES } from '../sql/health.sql.js';
import { OUTBOX_BACKLOG } from '../sql/dispatch.sql.js';
import { QUEUE_SAMPLE } from '../sql/metrics.sql.js';
import type { MaintenanceService } from './maintenance-service.js';

/**
 * Reads the cluster's queues for the metrics gauges: backlog, running steps,
 * oldest wait, stranded leases. Sampled by a loop rather than at each scrape,
 * so a scrape never waits on the database and scrapers cannot multiply its
 * queries; every replica samples the same tables, so any of them reports the
 * whole cluster. Runs only when a metrics module asked for samples.
 */
@Injectable()
export class MetricsSampler implements MaintenanceService {
  readonly loop: Loop;
  readonly runsAtStartup = true;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly stats: CycloneStats,
    @Inject(CYCLONE_SCHEDULER) scheduler: SchedulerRegistry,
  ) {
    this.loop = new Loop(
      'cyclone:metrics',
      () => stats.sampleIntervalMs ?? 0,
      async () => void (await this.sample()),
      scheduler,
      (err) => this.database.covers(err),
    );
  }

  get enabled(): boolean {
    return this.stats.sampleIntervalMs !== null;
  }

  /** One sample, kept in CycloneStats for the gauges. */
  async sample(): Promise<ClusterSample> {
    const [queues, stranded, outbox] = await Promise.all([
      this.database.query(QUEUE_SAMPLE, []),
      // The health indicator's measure: a live client's sweep reclaims within two ticks.
      this.database.query(STRANDED_LEASES, [this.stats.strandedAfterMs]),
      this.stats.dispatch ? this.database.query(OUTBOX_BACKLOG, []) : undefined,
    ]);
    const sample: ClusterSample = {
      queues: queues.rows.map((r) => ({
        queue: r.queue,
        available: r.available,
        scheduled: r.scheduled,
        running: r.running,
        oldestAvailableMs: Number(r.oldest_available_ms),
        paused: r.paused,
      })),
      strandedLeases: stranded.rows[0].stranded,
      ...(outbox ? { outbox: { rows: Number(outbox.rows[0].rows), oldestSeconds: outbox.rows[0].oldest_seconds ?? 0 } } : {}),
      sampledAt: new Date(),
    };
    this.stats.clusterSample = sample;
    return sample;
  }
}
