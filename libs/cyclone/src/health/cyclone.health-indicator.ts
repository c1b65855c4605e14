import { Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { toMs, type Duration } from '../common/duration.js';
import { messages } from '../cyclone.messages.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { DatabaseUnavailableError } from '../errors/database-unavailable.error.js';
import { QUEUE_STATE, STRANDED_LEASES } from '../sql/health.sql.js';
import { NEWER_VERSION_RUNS } from '../sql/code-workflow.sql.js';
import { OUTBOX_BACKLOG } from '../sql/dispatch.sql.js';
import { CycloneStats, type LoopState } from '../runtime/cyclone-stats.js';

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
 * reclaiming them), or when one of this client's loops has stalled. Degraded
 * when a queue's backlog is older than `maxQueueAge` or the LISTEN
 * connection is down (polling still moves jobs, only slower). It also says
 * which runs of this client's code workflows wait for a newer version than
 * this client's (`workflows.waitingForNewerVersion`): this client leaves
 * them to one that has it, which is expected while a new version rolls out
 * and is not a fault of this client's. With broker dispatch on, `dispatch`
 * says whether Redis answers, the outbox's backlog and its oldest row's age,
 * and the pending messages of this client's queues with the oldest one's
 * idle time; Redis down is degraded (the outbox keeps every dispatch, and
 * with whenRedisDown 'claim' the workers claim from PostgreSQL meanwhile).
 */
@Injectable()
export class CycloneHealthIndicator {
  constructor(
    private readonly health: HealthIndicatorService,
    private readonly database: CycloneDatabase,
    private readonly stats: CycloneStats,
  ) {}

  async isHealthy(key = 'cyclone', opts: CycloneHealthOptions = {}): Promise<HealthIndicatorResult> {
    const session = this.health.check(key);
    const timeoutMs = toMs(opts.timeout ?? 3_000, 'timeout');
    const maxQueueAgeMs = toMs(opts.maxQueueAge ?? 300_000, 'maxQueueAge');
    const [, maxPollMs] = this.stats.pollIntervalMs;
    const versions = this.stats.workflowVersions;
    const dispatch = this.stats.dispatch;
    let leases, queueRows, newerRows, outbox;
    try {
      [leases, queueRows, newerRows, outbox] = await withTimeout(
        Promise.all([
          this.database.query(STRANDED_LEASES, [this.stats.strandedAfterMs]).then((r) => r.rows[0]),
          this.database.query(QUEUE_STATE, []).then((r) => r.rows),
          versions.size === 0
            ? Promise.resolve([])
            : this.database.query(NEWER_VERSION_RUNS, [[...versions.keys()], [...versions.values()]]).then((r) => r.rows),
          dispatch ? this.database.query(OUTBOX_BACKLOG, []).then((r) => r.rows[0]) : Promise.resolve(undefined),
        ]),
        timeoutMs,
      );
    } catch (err) {
      // A health check's body is often public: the server's address stays in the log (see OutageLog).
      const reason = err instanceof DatabaseUnavailableError ? messages.databaseUnreachablePublic(err.reason) : (err as Error).message;
      return session.down({ database: 'unreachable', message: reason });
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
    const redisUp = dispatch?.redisUp() ?? true;
    const pending = dispatch && redisUp ? await withTimeout(dispatch.pending(), timeoutMs).catch(() => null) : null;
    const loops = this.stats.loopStates();
    // These loops tick every maxPoll at the latest; several missed ticks mean one is stuck.
    const stalled = loops
      .filter((loop) => POLL_INTERVAL_LOOPS.includes(loop.name) && isStalled(loop, 5 * maxPollMs + 5_000))
      .map((loop) => loop.name);
    const data = {
      database: 'up',
      listener: this.stats.listenerConnected() ? 'connected' : 'reconnecting',
      leases: {
        stranded: leases.stranded,
        oldestStrandedMs: leases.oldest_ms === null ? null : Number(leases.oldest_ms),
        heartbeatFailures: this.stats.heartbeatFailures,
        leasesLost: this.stats.leasesLost,
      },
      queues,
      ...(versions.size === 0
        ? {}
        : {
            workflows: {
              versions: Object.fromEntries(versions),
              waitingForNewerVersion: newerRows.map((row) => ({
                workflow: row.workflow,
                version: row.version,
                runs: row.runs,
                message: messages.newerVersionRuns(row.workflow, row.runs, row.version, versions.get(row.workflow)!),
              })),
            },
          }),
      ...(dispatch && outbox
        ? {
            dispatch: {
              redis: redisUp ? 'up' : 'down',
              outbox: { rows: Number(outbox.rows), oldestSeconds: outbox.oldest_seconds },
              pending: pending === null ? null : { messages: pending.count, oldestIdleMs: pending.oldestIdleMs },
            },
          }
        : {}),
      partitions: { kept: this.stats.keptPartitions },
      loops: Object.fromEntries(
        loops.map((loop) => [loop.name.replace(/^cyclone:/, ''), { lastTickAgeMs: loop.lastTickAgeMs, lastError: loop.lastError }]),
      ),
      worker: {
        owner: this.stats.clientId,
        running: this.stats.running(),
        claimFailures: this.stats.claimFailures,
      },
    };
    if (leases.stranded > 0 || stalled.length > 0) return session.down({ ...data, stalled });
    if (backlogged.length > 0 || !this.stats.listenerConnected() || !redisUp) return session.degraded({ ...data, backlogged });
    return session.up(data);
  }
}

/** The loops that run at the poll interval (retention, partitions and metrics run on longer intervals of their own). */
const POLL_INTERVAL_LOOPS = ['cyclone:poll', 'cyclone:recovery', 'cyclone:timers'];

function isStalled(loop: LoopState, afterMs: number): boolean {
  return loop.lastTickAgeMs === null || loop.lastTickAgeMs > afterMs;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`database did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
