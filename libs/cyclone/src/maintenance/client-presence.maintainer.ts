import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { CLIENT_REFRESH_INTERVAL_MS, CLIENT_STALE_AFTER_MS, CYCLONE_OPTIONS, CYCLONE_SCHEDULER } from '../cyclone.constants.js';
import { Loop } from '../common/loop.js';
import { errorMessage } from '../common/error-message.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import { CycloneInstance } from '../runtime/cyclone-instance.js';
import { CycloneStats } from '../runtime/cyclone-stats.js';
import { DELETE_CLIENT, RECORD_STEP_KINDS, REFRESH_CLIENT, type StepKindRecord } from '../sql/clients.sql.js';
import { flowKeys, isKeyed } from '../steps/flow-limits.js';
import { jobParams } from '../steps/job-params.js';
import type { RegisteredStep } from '../steps/registered-step.js';
import { backoffSchedule } from '../steps/retry-policy.js';
import { StepRegistry } from '../steps/step-registry.js';
import { WorkerHost } from '../worker/worker-host.js';

/** The version of cyclone-nestjs this client runs, told in its row. */
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/**
 * This client's presence in the database. At startup it records the step
 * kinds it registered, with their defaults, for cyclone_enqueue, and its row
 * in cyclone_clients (id, host, the queues it serves and their slots); then
 * it refreshes the row every CLIENT_REFRESH_INTERVAL_MS with one statement,
 * which also ages out the rows of clients gone without a word, and deletes
 * it at shutdown. A database that cannot be reached, or is not migrated yet,
 * only delays it: each refresh tries again, the kinds first.
 */
@Injectable()
export class ClientPresenceMaintainer implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Cyclone');
  readonly loop: Loop;
  private kindsRecorded = false;
  private started = false;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly registry: StepRegistry,
    private readonly stats: CycloneStats,
    private readonly instance: CycloneInstance,
    @Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(CYCLONE_SCHEDULER) scheduler: SchedulerRegistry,
    // Nest bootstraps a provider after those it depends on: the queues this client serves are known by then.
    _workers: WorkerHost,
  ) {
    this.loop = new Loop('cyclone:clients', () => CLIENT_REFRESH_INTERVAL_MS, () => this.refresh(), scheduler);
  }

  /** The first refresh is awaited, so the app's kinds can be enqueued from SQL once it has started. */
  async onApplicationBootstrap(): Promise<void> {
    if (!this.instance.isPrimary) return;
    this.started = true;
    this.stats.track(this.loop);
    await this.refresh().catch((err: unknown) =>
      this.logger.warn(`Could not record this client in the database; trying again shortly: ${errorMessage(err)}`),
    );
    this.loop.start();
  }

  async onModuleDestroy(): Promise<void> {
    if (!this.started) return;
    await this.loop.stop();
    // A row left behind is aged out by the other clients' refreshes.
    await this.database
      .query(DELETE_CLIENT, [this.stats.clientId])
      .catch((err: unknown) => this.logger.warn(`Could not remove this client's row: ${errorMessage(err)}`));
  }

  /** Records the kinds (until that has worked once) and refreshes this client's row. */
  async refresh(): Promise<void> {
    const id = this.stats.clientId;
    if (!this.kindsRecorded) {
      const kinds = this.registry.all().map((step) => this.kindRecord(step));
      if (kinds.length > 0) await this.database.query(RECORD_STEP_KINDS, [JSON.stringify(kinds), id]);
      this.kindsRecorded = true;
    }
    const queues = JSON.stringify(Object.fromEntries(this.stats.servedQueues));
    await this.database.query(REFRESH_CLIENT, [id, hostname(), process.pid, queues, JSON.stringify({ version: VERSION }), CLIENT_STALE_AFTER_MS]);
  }

  /** A kind with the defaults an enqueue of it without options gets from this client. */
  private kindRecord(step: RegisteredStep): StepKindRecord {
    const defaults = jobParams(step, undefined, this.options);
    const keyed = step.flow !== undefined && isKeyed(step.flow);
    return {
      kind: step.kind,
      queue: defaults.queue,
      priority: defaults.priority,
      max_attempts: defaults.maxAttempts,
      timeout_ms: defaults.timeoutMs,
      retention_ms: defaults.retentionMs,
      max_reclaims: defaults.maxReclaims,
      // One draw of its backoff (a function may add jitter) serves every job enqueued from SQL.
      backoff_ms: backoffSchedule(step, defaults.maxAttempts, this.logger),
      // Limits without a key apply to every step of the kind: their keys do not depend on the input.
      flow_key: keyed ? null : flowKeys(step.kind, step.flow, null)[0],
      limit_key_option: !keyed ? null : step.flow?.concurrencyKey ? 'concurrency.key' : 'rateLimit.key',
      max_payload_bytes: this.options.maxPayloadBytes,
    };
  }
}
