import { Logger } from '@nestjs/common';
import type { CycloneDatabase } from '../database/cyclone-database.js';
import { PermanentError } from '../errors/permanent.error.js';
import { StepAbortedError, type AbortReason } from '../errors/step-aborted.error.js';
import { toJson } from '../common/validate.js';
import type { RegisteredStep } from '../steps/registered-step.js';
import { Snooze } from '../interfaces/snooze.js';
import { FAIL_STEP, SNOOZE_STEP } from '../sql/complete.sql.js';
import type { CompletionBatcher } from './completion-batcher.js';
import type { ClaimedStep } from '../sql/claim.sql.js';
import { Heartbeat } from './heartbeat.js';
import { retryDelay } from '../steps/retry-policy.js';
import { errorMessage } from '../common/error-message.js';
import { isRejectedData } from '../database/rejected-data.js';
import { storableText } from '../common/storable-text.js';
import { messages } from '../cyclone.messages.js';
import { StepContextImpl } from './step-context.js';
import type { CycloneStats } from '../runtime/cyclone-stats.js';

export interface ExecutionDeps {
  database: CycloneDatabase;
  owner: string;
  leaseTtlMs: number;
  maxPayloadBytes: number;
  stats: CycloneStats;
  completions: CompletionBatcher;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown } | { abandoned: true };

/**
 * How long a handler may keep running after its signal aborted before the
 * worker stops waiting for it and frees the slot. JavaScript cannot kill a
 * promise; one that ignores its signal runs on, and its result is dropped.
 */
const ABANDON_AFTER_MS = 2_000;

/** The longest delay a Node timer keeps (about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * One attempt of one claimed step: the handler call, its heartbeat and
 * deadline, and the write that records the outcome. Every write is a
 * compare-and-set on this attempt's lease, so an outcome that arrives after
 * the step moved on changes nothing.
 */
export class StepExecution {
  readonly controller = new AbortController();
  private readonly logger: Logger;
  private readonly heartbeat: Heartbeat;
  private deadlineTimer?: NodeJS.Timeout;
  private abandonTimer?: NodeJS.Timeout;
  private abandon?: () => void;
  /** Set once the step is handed back at shutdown: nothing else may be written. */
  handedBack = false;

  constructor(
    readonly row: ClaimedStep,
    private readonly step: RegisteredStep,
    private readonly deps: ExecutionDeps,
  ) {
    this.logger = new Logger(`Cyclone:${row.kind}`);
    this.handlerDone = new Promise((resolve) => {
      this.settleHandler = () => {
        this.returned = true;
        resolve();
      };
    });
    this.heartbeat = new Heartbeat(row, deps.database, deps.owner, deps.leaseTtlMs, deps.stats, this.logger, (reason) => {
      // Once the handler has returned, a renewal that matches nothing has
      // usually lost the race with this attempt's own completion; the
      // outcome's compare-and-set says whether the lease was really lost.
      if (this.returned) return;
      if (reason !== 'timeout') deps.stats.leasesLost += 1;
      this.abort(reason);
    });
  }

  get aborted(): AbortReason | undefined {
    const reason = this.controller.signal.reason;
    return reason instanceof StepAbortedError ? reason.reason : undefined;
  }

  abort(reason: AbortReason): void {
    if (this.controller.signal.aborted) return;
    this.controller.abort(new StepAbortedError(reason, this.row.run_id, this.row.node_id));
    this.heartbeat.stop();
    this.abandonTimer = setTimeout(() => this.abandon?.(), reason === 'shutdown' ? 0 : ABANDON_AFTER_MS);
  }

  /** Settles once the attempt's outcome is recorded (or given up on); never rejects. */
  finished: Promise<void> = Promise.resolve();

  /** Settles once the handler has returned, thrown or been given up on; never rejects. */
  readonly handlerDone: Promise<void>;
  private settleHandler!: () => void;
  private returned = false;

  start(): Promise<void> {
    this.finished = this.run();
    return this.finished;
  }

  private async run(): Promise<void> {
    const timeoutMs = this.row.timeout_ms === null ? null : Number(this.row.timeout_ms);
    const deadline = timeoutMs === null ? null : new Date(Date.now() + timeoutMs);
    // Node fires a timer longer than MAX_TIMER_MS after 1 ms; past that the
    // database guard (the heartbeat stops matching) ends the attempt instead.
    if (timeoutMs !== null && timeoutMs <= MAX_TIMER_MS) {
      this.deadlineTimer = setTimeout(() => this.abort('timeout'), timeoutMs);
    }
    this.heartbeat.start();
    const ctx = new StepContextImpl(this.row, this.controller.signal, deadline, this.logger);
    try {
      const outcome = await this.call(ctx);
      this.settleHandler();
      await this.record(outcome);
    } catch (err) {
      // Recording failed (the database is unreachable): the lease will expire
      // and the sweep hands the step to a live worker.
      this.logger.error(
        `Could not record the outcome of step ${this.row.node_id} (run ${this.row.run_id}): ${errorMessage(err)}`,
      );
    } finally {
      this.settleHandler();
      this.heartbeat.stop();
      clearTimeout(this.deadlineTimer);
      clearTimeout(this.abandonTimer);
    }
  }

  private call(ctx: StepContextImpl): Promise<Outcome> {
    const handled = Promise.resolve()
      .then(() => this.step.handler(this.row.input, ctx))
      .then(
        (value): Outcome => ({ ok: true, value }),
        (error: unknown): Outcome => ({ ok: false, error }),
      );
    const abandoned = new Promise<Outcome>((resolve) => {
      this.abandon = () => resolve({ abandoned: true });
    });
    return Promise.race([handled, abandoned]);
  }

  private async record(outcome: Outcome): Promise<void> {
    const reason = this.aborted;
    if (this.handedBack || reason === 'shutdown') return;
    if (reason === 'timeout') {
      // Past its deadline the attempt has timed out, whatever the handler returned.
      return this.fail(`Step timed out after ${this.row.timeout_ms} ms`, 'timeout');
    }
    if ('abandoned' in outcome) return;
    if (!outcome.ok) {
      const { error } = outcome;
      if (isInstance(error, PermanentError)) return this.fail(errorMessage(error), 'permanent');
      return this.fail(errorMessage(error), 'error');
    }
    if (isInstance(outcome.value, Snooze)) return this.snooze(outcome.value.delayMs);
    let output: string;
    try {
      output = toJson(outcome.value ?? null, 'output', this.deps.maxPayloadBytes);
    } catch (err) {
      return this.fail((err as Error).message, 'error');
    }
    let completed: boolean;
    try {
      completed = await this.deps.completions.complete(this.row.id, this.row.lease_generation, output);
    } catch (err) {
      // The database refused this output: a failed attempt, like a handler error.
      if (isRejectedData(err)) return this.fail(`The output could not be stored: ${(err as Error).message}`, 'error');
      throw err;
    }
    if (!completed) this.logDropped('completion');
  }

  /**
   * Records a failed attempt. A failure must be recorded whatever its error
   * says, or the step stays running until its lease expires and is run again
   * without consuming an attempt, forever: so the text is made storable, and
   * if the database still refuses it, a text of ours is stored instead.
   */
  private async fail(message: string, kind: 'error' | 'permanent' | 'timeout'): Promise<void> {
    const backoff = retryDelay(this.step, this.row.attempt, this.logger);
    const write = (text: string) => this.deps.database.query(FAIL_STEP, [...this.lease(), text, kind, backoff]);
    let rows: { state: string | null }[];
    try {
      ({ rows } = await write(storableText(message)));
    } catch (err) {
      if (!isRejectedData(err)) throw err;
      ({ rows } = await write(storableText(messages.unstorableError(errorMessage(err)))));
    }
    const state = rows[0].state;
    if (state === null) return this.logDropped('failure');
    this.logger.warn(
      `Step ${this.row.node_id} (run ${this.row.run_id}) attempt ${this.row.attempt} failed (${kind}): ${storableText(message)}; ` +
        (state === 'discarded'
          ? 'discarded'
          : // A backoff of its own was stored with the step (it may draw a different delay each call).
            `retrying ${this.step.backoff ? 'after its backoff' : `in ${backoff} ms`}`),
    );
  }

  private async snooze(delayMs: number): Promise<void> {
    const { rows } = await this.deps.database.query(SNOOZE_STEP, [...this.lease(), delayMs]);
    if (!rows[0].ok) this.logDropped('snooze');
  }

  private lease(): [string, string, string] {
    return [this.row.id, this.deps.owner, this.row.lease_generation];
  }

  private logDropped(what: string): void {
    this.logger.debug(
      `Dropped the ${what} of step ${this.row.node_id} (run ${this.row.run_id}): the step is no longer this worker's lease`,
    );
  }
}

/** `instanceof` for what a handler threw or returned, which may be a proxy whose traps throw. */
function isInstance<T>(value: unknown, type: abstract new (...args: any[]) => T): value is T {
  try {
    return value instanceof type;
  } catch {
    return false;
  }
}
