import { Logger } from '@nestjs/common';
import type { CycloneDatabase } from '../database/cyclone-database.js';
import { PermanentError } from '../errors/permanent.error.js';
import { StepAbortedError, type AbortReason } from '../errors/step-aborted.error.js';
import { toJson } from '../common/validate.js';
import type { RegisteredStep } from '../steps/registered-step.js';
import { Snooze } from '../interfaces/snooze.js';
import { FAIL_STEP, FAIL_STEP_WITHOUT_STACK, SNOOZE_STEP } from '../sql/complete.sql.js';
import { sqlStateOf, UNDEFINED_FUNCTION } from '../database/database-fault.js';
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
import type { AttemptOutcome } from '../runtime/engine-events.js';
import type { AttemptEnd, CycloneTracer } from '../tracing/cyclone-tracer.js';
import { ProgressReporter } from './progress-reporter.js';
import { PassEnded } from '../workflow/code/pass-ended.js';
import { isInstance } from '../common/is-instance.js';
import { stackOf } from '../common/stack-of.js';

export interface ExecutionDeps {
  database: CycloneDatabase;
  queue: string;
  owner: string;
  leaseTtlMs: number;
  maxPayloadBytes: number;
  stats: CycloneStats;
  completions: CompletionBatcher;
  tracer: CycloneTracer;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown } | { abandoned: true };

/** What recording an attempt's outcome did: for its span, and for the engine's observers. */
interface Recorded extends AttemptEnd {
  outputJson?: string;
}

/** Outcomes that observers hear of; the others changed nothing (or nothing this worker could write). */
const OBSERVED: ReadonlySet<string> = new Set<AttemptOutcome>([
  'completed',
  'retried',
  'discarded',
  'snoozed',
  'cancelled',
  'suspended',
]);

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
  private progressReporter?: ProgressReporter;
  /** Set once the step is handed back at shutdown: nothing else may be written. */
  handedBack = false;

  /** `leaseEndsAt`: when (performance.now() time) the lease of a step claimed ahead ends, unless renewed. */
  constructor(
    readonly row: ClaimedStep,
    private readonly step: RegisteredStep,
    private readonly deps: ExecutionDeps,
    private readonly leaseEndsAt?: number,
  ) {
    this.logger = new Logger(`Cyclone:${row.kind}`);
    this.handlerDone = new Promise((resolve) => {
      this.settleHandler = () => {
        this.returned = true;
        this.progressReporter?.stop();
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
  /** How the attempt ended, once `finished` has settled: 'unrecorded' when no outcome could be written. */
  outcome?: string;

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
    this.heartbeat.start(this.leaseEndsAt);
    const { stats, tracer, queue } = this.deps;
    stats.events.stepStarted({ queue, kind: this.row.kind, waitMs: this.row.wait_ms });
    const span = tracer.attempt(this.row, queue);
    const ctx = new StepContextImpl(this.row, this.controller.signal, deadline, this.logger, (value) => this.progress(value));
    let end: AttemptEnd = { outcome: 'unrecorded', failed: false };
    try {
      const startedAt = performance.now();
      const outcome = await span.run(() => this.call(ctx));
      this.settleHandler();
      stats.events.handlerRan({ queue, kind: this.row.kind, durationMs: performance.now() - startedAt });
      const recorded = await this.record(outcome);
      end = recorded;
      if (OBSERVED.has(recorded.outcome)) this.tell(recorded);
    } catch (err) {
      // Recording failed (the database is unreachable): the lease will expire
      // and the sweep hands the step to a live worker.
      end = { outcome: 'unrecorded', failed: false, error: (err as Error).message };
      this.logger.error(
        `Could not record the outcome of step ${this.row.node_id} (run ${this.row.run_id}): ${errorMessage(err)}`,
      );
    } finally {
      this.settleHandler();
      this.outcome = end.outcome;
      span.end(end);
      this.heartbeat.stop();
      clearTimeout(this.deadlineTimer);
      clearTimeout(this.abandonTimer);
      stats.events.attemptEnded({
        runId: this.row.run_id,
        nodeId: this.row.node_id,
        kind: this.row.kind,
        queue,
        attempt: this.row.attempt,
        fencingToken: Number(this.row.lease_generation),
        outcome: end.outcome,
      });
    }
  }

  /** Tells the engine's observers (metrics, step event listeners) what the attempt's outcome was, once committed. */
  private tell(recorded: Recorded): void {
    this.deps.stats.events.stepFinished({
      runId: this.row.run_id,
      nodeId: this.row.node_id,
      kind: this.row.kind,
      queue: this.deps.queue,
      attempt: this.row.attempt,
      outcome: recorded.outcome as AttemptOutcome,
      failed: recorded.failed,
      outputJson: recorded.outputJson,
      error: recorded.error,
      errorKind: recorded.errorKind,
    });
  }

  /** `ctx.progress`: checked now, written throttled while the handler runs. */
  private progress(value: unknown): void {
    const json = toJson(value, 'progress', this.deps.maxPayloadBytes);
    if (this.returned) return;
    this.progressReporter ??= new ProgressReporter(
      this.row,
      this.deps.database,
      this.deps.owner,
      // The heartbeat's interval: progress never writes more often than renewals do.
      this.deps.leaseTtlMs / 3,
      this.logger,
    );
    this.progressReporter.report(json);
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

  private async record(outcome: Outcome): Promise<Recorded> {
    const reason = this.aborted;
    if (this.handedBack || reason === 'shutdown') return { outcome: 'handed_back', failed: false };
    // The run was cancelled (the step is, for good): there is nothing left to write.
    if (reason === 'cancelled') return { outcome: 'cancelled', failed: false };
    const thrown = 'ok' in outcome && !outcome.ok ? outcome.error : undefined;
    if (reason === 'timeout') {
      // Past its deadline the attempt has timed out, whatever the handler returned.
      return this.fail(`Step timed out after ${this.row.timeout_ms} ms`, 'timeout', thrown);
    }
    if ('abandoned' in outcome) return { outcome: 'lease_lost', failed: false };
    if (!outcome.ok) {
      const { error } = outcome;
      if (isInstance(error, PermanentError)) return this.fail(errorMessage(error), 'permanent', error);
      return this.fail(errorMessage(error), 'error', error);
    }
    if (isInstance(outcome.value, Snooze)) return this.snooze(outcome.value.delayMs);
    // A pass of a code workflow that ended waiting, or without its lease: its own writes said all there was to say.
    if (isInstance(outcome.value, PassEnded)) {
      if (outcome.value.reason === 'suspended') return { outcome: 'suspended', failed: false };
      return outcome.value.reason === 'lease_lost' ? this.dropped('pass') : { outcome: 'unrecorded', failed: false };
    }
    let output: string;
    try {
      output = toJson(outcome.value ?? null, 'output', this.deps.maxPayloadBytes);
    } catch (err) {
      return this.fail((err as Error).message, 'error', err);
    }
    let completed: boolean;
    try {
      completed = await this.deps.completions.complete(this.row.run_id, this.row.id, this.row.lease_generation, output);
    } catch (err) {
      // The database refused this output: a failed attempt, like a handler error.
      if (isRejectedData(err)) return this.fail(`The output could not be stored: ${(err as Error).message}`, 'error', err);
      throw err;
    }
    if (!completed) return this.dropped('completion');
    return { outcome: 'completed', failed: false, outputJson: output };
  }

  /**
   * Records a failed attempt. A failure must be recorded whatever its error
   * says, or the step stays running until its lease expires and is run again
   * without consuming an attempt, forever: so the text is made storable, and
   * if the database still refuses it, a text of ours is stored instead.
   */
  private async fail(message: string, kind: 'error' | 'permanent' | 'timeout', thrown: unknown): Promise<Recorded> {
    const backoff = retryDelay(this.step, this.row.attempt, this.logger);
    const stack = stackOf(thrown);
    const write = async (text: string) => {
      try {
        return await this.deps.database.query(FAIL_STEP, [...this.lease(), text, kind, backoff, stack]);
      } catch (err) {
        if (sqlStateOf(err) !== UNDEFINED_FUNCTION) throw err;
        return this.deps.database.query(FAIL_STEP_WITHOUT_STACK, [...this.lease(), text, kind, backoff]);
      }
    };
    const text = storableText(message);
    let rows: { state: string | null }[];
    try {
      ({ rows } = await write(text));
    } catch (err) {
      if (!isRejectedData(err)) throw err;
      ({ rows } = await write(storableText(messages.unstorableError(errorMessage(err)))));
    }
    const state = rows[0].state;
    if (state === null) return this.dropped('failure');
    this.logger.warn(
      `Step ${this.row.node_id} (run ${this.row.run_id}) attempt ${this.row.attempt} failed (${kind}): ${text}; ` +
        (state === 'discarded'
          ? 'discarded'
          : // A backoff of its own was stored with the step (it may draw a different delay each call).
            `retrying ${this.step.backoff ? 'after its backoff' : `in ${backoff} ms`}`),
    );
    return { outcome: state === 'discarded' ? 'discarded' : 'retried', failed: true, error: message, errorKind: kind, thrown };
  }

  private async snooze(delayMs: number): Promise<Recorded> {
    const { rows } = await this.deps.database.query(SNOOZE_STEP, [...this.lease(), delayMs]);
    if (!rows[0].ok) return this.dropped('snooze');
    return { outcome: 'snoozed', failed: false };
  }

  private lease(): [string, string, string, string] {
    return [this.row.run_id, this.row.id, this.deps.owner, this.row.lease_generation];
  }

  private dropped(what: string): Recorded {
    this.logger.debug(
      `Dropped the ${what} of step ${this.row.node_id} (run ${this.row.run_id}): the step is no longer this worker's lease`,
    );
    return { outcome: 'lease_lost', failed: false };
  }
}
