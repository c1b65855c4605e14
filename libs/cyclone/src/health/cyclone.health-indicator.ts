import { Inject, Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { CYCLONE_OPTIONS } from '../cyclone.constants.js';
import { toMs, type Duration } from '../common/duration.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import type { ResolvedOptions } from '../module/resolved-options.js';
import { QUEUE_STATE, STRANDED_LEASES } from '../sql/health.sql.js';
import { NotificationListener } from '../worker/notification-listener.js';
import { WorkerHost } from '../worker/worker-host.js';
import { RetentionSweeper } from '../maintenance/retention.sweeper.js';
import type { Loop } from '../maintenance/loop.js';
import { TimerSweeper } from '../maintenance/timer.sweeper.js';

export interface CycloneHealthOptions {
  /** A queue whose oldest due step has waited longer than this is reported degraded. Default 5 min. */
  maxQueueAge?: Duration;
  /** How long each query may take before the database is reported down. Default 3 s. */
  timeout?: Duration;
}

interface QueueState {
  available: number;
  running: number;
  oldestAvailableMs: number;
  /** Stopped with pauseQueue: its backlog is expected, not a fault. */
  paused: boolean;
}

/**
 * Cyclone's Terminus indicator. Down when the database does not answer in
 * time, when leases stay expired past TTL + two poll ticks (no live client is
 * reclaiming them), or when this client's poll loop has stalled. Degraded when
 * a queue's backlog is older than `maxQueueAge` or the LISTEN connection is
 * down (polling still moves jobs, only slower).
 */
@Injectable()
export class CycloneHealthIndicator {
  constructor(
    private readonly health: HealthIndicatorService,
    private readonly database: CycloneDatabase,
    private readonly host: WorkerHost,
    private readonly listener: NotificationListener,
    private readonly retention: RetentionSweeper,
    private readonly timers: TimerSweeper,
    @Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions,
  ) {}

  async isHealthy(key = 'cyclone', opts: CycloneHealthOptions = {}): Promise<HealthIndicatorResult> {
    const session = this.health.check(key);
    const timeoutMs = toMs(opts.timeout ?? 3_000, 'timeout');
    const maxQueueAgeMs = toMs(opts.maxQueueAge ?? 300_000, 'maxQueueAge');
    const [, maxPollMs] = this.options.pollIntervalMs;
    let leases: { stranded: number; oldest_ms: string | null };
    let queueRows: { queue: string; available: number; running: number; oldest_available_ms: string; paused: boolean }[];
    try {
      [leases, queueRows] = await withTimeout(
        Promise.all([
          this.database.query(STRANDED_LEASES, [2 * maxPollMs]).then((r) => r.rows[0] as typeof leases),
          this.database.query(QUEUE_STATE).then((r) => r.rows as typeof queueRows),
        ]),
        timeoutMs,
      );
    } catch (err) {
      return session.down({ database: 'unreachable', message: (err as Error).message });
    }

    const queues: Record<string, QueueState> = {};
    for (const row of queueRows) {
      queues[row.queue] = {
        available: row.available,
        running: row.running,
        oldestAvailableMs: Number(row.oldest_available_ms),
        paused: row.paused,
      };
    }
    const backlogged = Object.entries(queues)
      .filter(([, q]) => !q.paused && q.oldestAvailableMs > maxQueueAgeMs)
      .map(([name]) => name);
    const pollAgeMs = loopState(this.host.pollLoop).lastTickAgeMs;
    // A poll tick is due every maxPoll at the latest; several missed ones mean the loop is stuck.
    const pollStalled = this.host.workers.size > 0 && (pollAgeMs === null || pollAgeMs > 5 * maxPollMs + 5_000);
    const data = {
      database: 'up',
      listener: this.listener.isConnected ? 'connected' : 'reconnecting',
      leases: {
        stranded: leases.stranded,
        oldestStrandedMs: leases.oldest_ms === null ? null : Number(leases.oldest_ms),
        heartbeatFailures: this.host.stats.heartbeatFailures,
        leasesLost: this.host.stats.leasesLost,
      },
      queues,
      loops: {
        poll: loopState(this.host.pollLoop),
        timers: loopState(this.timers.loop),
        retention: loopState(this.retention.loop),
      },
      worker: {
        owner: this.host.owner,
        running: [...this.host.workers.values()].reduce((n, w) => n + w.running.size, 0),
        claimFailures: this.host.stats.claimFailures,
      },
    };
    if (leases.stranded > 0 || pollStalled) return session.down(data);
    if (backlogged.length > 0 || !this.listener.isConnected) return session.degraded({ ...data, backlogged });
    return session.up(data);
  }
}

function loopState(loop: Loop): { lastTickAgeMs: number | null; lastError: string | null } {
  return {
    // Before its first tick ends, a loop's age counts from its start.
    lastTickAgeMs: since(loop.lastTickAt ?? loop.startedAt),
    lastError: loop.lastError,
  };
}

function since(date: Date | null): number | null {
  return date ? Date.now() - date.getTime() : null;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`database did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
