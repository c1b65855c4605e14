import { Inject, Injectable, Logger } from '@nestjs/common';
import type { EntityManager, QueryRunner } from 'typeorm';
import { CYCLONE_OPTIONS } from '../cyclone.constants.js';
import { toMs, type Duration } from '../common/duration.js';
import { checkName, checkOptions, toJson } from '../common/validate.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { DuplicateError } from '../errors/duplicate.error.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { InvalidStateError } from '../errors/invalid-state.error.js';
import { NotInTransactionError } from '../errors/not-in-transaction.error.js';
import { QueueNotFoundError } from '../errors/queue-not-found.error.js';
import { ResultTimeoutError } from '../errors/result-timeout.error.js';
import { RunCancelledError } from '../errors/run-cancelled.error.js';
import { RunFailedError } from '../errors/run-failed.error.js';
import { RunNotFoundError } from '../errors/run-not-found.error.js';
import { StepNotFoundError } from '../errors/step-not-found.error.js';
import type { EnqueueOptions } from '../interfaces/enqueue-options.interface.js';
import type { ErrorKind, RunInfo, RunState, StepInfo } from '../interfaces/run-info.interface.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import type { StepInput, StepOutput, StepRef } from '../definitions/define-step.js';
import { StepRegistry } from '../steps/step-registry.js';
import type { RegisteredStep } from '../steps/registered-step.js';
import { backoffSchedule } from '../steps/retry-policy.js';
import { settle, sqlStateOf, toCycloneError, type CallFaultContext } from '../database/database-fault.js';
import { NotificationListener } from '../notifications/notification-listener.js';
import { WakePublisher } from '../notifications/wake-publisher.js';
import type { Statement } from '../database/statement.js';
import type pg from 'pg';
import { ENQUEUE_JOB, FIND_UNIQUE_HOLDER, UNIQUE_CONFLICT } from '../sql/enqueue.sql.js';
import {
  PAUSED_QUEUES,
  PAUSE_QUEUE,
  PAUSE_RUN,
  RESUME_QUEUE,
  RESUME_RUN,
  SIGNAL_RUN,
} from '../sql/workflow.sql.js';
import { UnknownSignalError } from '../errors/unknown-signal.error.js';
import type { StartOptions } from '../interfaces/workflow-options.interface.js';
import type { WorkflowDefinition } from '../definitions/define-workflow.js';
import { WorkflowRegistry } from '../workflow/workflow-registry.js';
import { CodeWorkflowRegistry } from '../workflow/code/code-workflow-registry.js';
import { prepareStart } from './workflow-start.js';
import { describeValue, messages } from '../cyclone.messages.js';
import { ScheduleRegistry } from '../schedules/schedule-registry.js';
import { SCHEDULE_STATE } from '../sql/schedules.sql.js';
import type { ScheduleInfo } from '../interfaces/schedule-info.interface.js';
import {
  CANCEL_RUN,
  GET_OUTPUT,
  GET_RUN,
  LIST_STEPS,
  RETRY_STEPS,
  RUN_NOW,
  RUN_OUTCOME,
  STEP_STATE,
} from '../sql/runs.sql.js';
import { EnqueueBatcher } from './enqueue-batcher.js';
import { LocalWorkers } from '../worker/local-workers.js';
import { enqueueJobValues, jobParams, type JobParams, type NewJob } from '../steps/job-params.js';
import { flowKeys } from '../steps/flow-limits.js';
import { toRunInfo, toStepInfo } from './row-mappers.js';
import { waitForRun } from './run-waiter.js';
import { uuid7 } from '../common/uuid7.js';
import { CycloneStats } from '../runtime/cyclone-stats.js';
import { CycloneTracer } from '../tracing/cyclone-tracer.js';
import { errorMessage } from '../common/error-message.js';

type Kind = string | StepRef<any, any>;
/** What result() gives for a run of `S`: a step kind's output, or a workflow's (a code workflow's typed reference). */
type RunOutput<S> = S extends WorkflowDefinition<any, infer O> ? O : StepOutput<S>;
/** Runs a statement where the call belongs: on the pool, or in a caller's transaction. */
type Query = <P extends readonly unknown[], R extends pg.QueryResultRow>(stmt: Statement<P, R>, params: P) => Promise<R[]>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** SQLSTATE of a unique violation: a retried run whose key another run took meanwhile. */
const UNIQUE_VIOLATION = '23505';

export interface ResultOptions {
  /** How long to wait. Default 30 s. */
  timeout?: Duration;
}

const RESULT_OPTION_NAMES = ['timeout'] as const;

/**
 * Enqueues jobs and inspects and steers runs. Every call validates its
 * arguments before writing, so a call rejected for its arguments leaves
 * nothing behind. Every failure is a CycloneError: a database that cannot
 * serve the call is DatabaseUnavailableError (nothing was written), and a
 * connection lost while a write was committing is OutcomeUnknownError,
 * carrying the run ids the write was for, so a caller can look them up
 * before repeating it.
 */
@Injectable()
export class CycloneClient {
  private readonly logger = new Logger('Cyclone');
  private readonly enqueues: EnqueueBatcher;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly registry: StepRegistry,
    private readonly listener: NotificationListener,
    private readonly wakes: WakePublisher,
    private readonly workflows: WorkflowRegistry,
    @Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions,
    private readonly stats: CycloneStats,
    private readonly tracer: CycloneTracer,
    private readonly schedules: ScheduleRegistry,
    private readonly codeWorkflows: CodeWorkflowRegistry,
    localWorkers: LocalWorkers,
  ) {
    this.enqueues = new EnqueueBatcher(database, wakes, localWorkers, { owner: stats.clientId, leaseTtlMs: options.leaseTtlMs });
  }

  /** Enqueues a standalone job and returns its run id once it is committed. */
  async enqueue<S extends Kind>(kind: S, input: StepInput<S>, opts?: EnqueueOptions): Promise<string> {
    const prepared = this.prepare(kind, input, opts);
    const { params } = prepared;
    const runId = await this.tracer.produce(producer('enqueue', params), async (traceContext) => {
      const job: NewJob = { ...prepared, traceContext };
      const wrote = this.wrote([job.runId]);
      if (params.uniqueKey === null) {
        await settle(this.enqueues.enqueue(job), wrote);
        return job.runId;
      }
      const { id, due } = await this.insertJob(job, false, this.pooled(wrote));
      if (due) this.wakes.wake(params.queue);
      return id;
    });
    this.stats.events.jobsEnqueued({ queue: params.queue, kind: params.kind, count: 1 });
    return runId;
  }

  /** Enqueues a job whose output is nothing, such as sending an email. */
  async enqueueAction<S extends Kind>(kind: S, input: StepInput<S>, opts?: EnqueueOptions): Promise<string> {
    return this.enqueue(kind, input, opts);
  }

  /**
   * Enqueues inside the caller's open transaction: the job exists only if
   * that transaction commits, and its wake-up is sent only then. A duplicate
   * unique key throws `DuplicateError` (or keeps, replaces or debounces the
   * holder, as `unique.onConflict` says) without aborting the transaction.
   */
  async enqueueTx<S extends Kind>(
    tx: EntityManager | QueryRunner,
    kind: S,
    input: StepInput<S>,
    opts?: EnqueueOptions,
  ): Promise<string> {
    const runner = openTransaction(tx);
    const prepared = this.prepare(kind, input, opts);
    // The caller's transaction commits, or not, later: whatever goes wrong here, nothing has committed.
    const context = this.read();
    const query: Query = async (stmt, values) => {
      try {
        return await runner.query(stmt.text, [...values]);
      } catch (err) {
        // A statement the caller's transaction ran before this one had failed.
        if (sqlStateOf(err) === IN_FAILED_TRANSACTION) throw new NotInTransactionError(messages.transactionAborted());
        throw toCycloneError(err, context);
      }
    };
    const { params } = prepared;
    const runId = await this.tracer.produce(producer('enqueue', params), async (traceContext) =>
      (await this.insertJob({ ...prepared, traceContext }, true, query)).id,
    );
    this.stats.events.jobsEnqueued({ queue: params.queue, kind: params.kind, count: 1 });
    return runId;
  }

  /** Enqueues many jobs of one kind in one statement; returns their run ids in input order. */
  async enqueueMany<S extends Kind>(kind: S, inputs: StepInput<S>[], opts?: EnqueueOptions): Promise<string[]> {
    const list = checkInputList(inputs);
    const step = this.registry.get(kindOf(kind));
    const params = jobParams(step, opts, this.options);
    if (params.uniqueKey !== null) {
      throw new InvalidOptionError(
        'Option "unique" is not supported by enqueueMany: keys would collide within the batch. Use enqueue for unique jobs.',
      );
    }
    const texts = list.map((input, i) => toJson(input, `input at index ${i}`, this.options.maxPayloadBytes));
    if (texts.length === 0) return [];
    const info = { ...producer('enqueue_many', params), count: texts.length };
    const runIds = await this.tracer.produce(info, async (traceContext) => {
      const jobs = texts.map((inputJson, i) => ({ ...this.newJob(step, params, inputJson, list[i]), traceContext }));
      const ids = jobs.map((j) => j.runId);
      await settle(this.enqueues.insert(jobs), this.wrote(ids));
      return ids;
    });
    this.stats.events.jobsEnqueued({ queue: params.queue, kind: params.kind, count: runIds.length });
    return runIds;
  }

  async getRun(runId: string): Promise<RunInfo> {
    const { rows } = await settle(this.database.query(GET_RUN, [checkRunId(runId)]), this.read());
    if (rows.length === 0) throw new RunNotFoundError(runId);
    return toRunInfo(rows[0]);
  }

  async listSteps(runId: string): Promise<StepInfo[]> {
    const { rows } = await settle(this.database.query(LIST_STEPS, [checkRunId(runId)]), this.read());
    if (rows.length === 0) throw new RunNotFoundError(runId);
    return rows.map(toStepInfo);
  }

  /**
   * Waits for a run to finish and returns its output: a standalone job's
   * output, a code workflow's return value, or for a DAG workflow an object
   * of its sink nodes' outputs. Throws
   * `RunFailedError` or `RunCancelledError` for those outcomes, and
   * `ResultTimeoutError` when the wait runs out.
   */
  async result<S extends Kind | WorkflowDefinition<any, any>>(runId: string, opts?: ResultOptions): Promise<RunOutput<S>>;
  async result(runId: string, given?: ResultOptions): Promise<unknown> {
    checkRunId(runId);
    const opts = checkOptions<ResultOptions>(given, 'result options', RESULT_OPTION_NAMES);
    const timeoutMs = toMs(opts.timeout ?? 30_000, 'timeout');
    let lastState: RunState = 'running';
    const waiting = waitForRun(this.listener, this.database, runId, timeoutMs, async () => {
      const { rows } = await this.database.query(RUN_OUTCOME, [runId]);
      if (rows.length === 0) throw new RunNotFoundError(runId);
      lastState = rows[0].state;
      switch (lastState) {
        case 'completed':
          // A job's output, a code workflow's return value, or a DAG's sink outputs.
          return { value: rows[0].kind !== null || rows[0].version !== null ? rows[0].output : sinkOutputs(rows) };
        case 'failed':
          throw new RunFailedError(
            runId,
            rows
              .filter((r) => r.step_state === 'discarded')
              .map((r) => ({ nodeId: r.node_id, error: r.error, errorKind: r.error_kind as ErrorKind | null })),
          );
        case 'cancelled':
          throw new RunCancelledError(runId);
        default:
          return undefined;
      }
    });
    const outcome = await settle(waiting, this.read());
    if (!outcome) throw new ResultTimeoutError(runId, lastState, timeoutMs);
    return outcome.value;
  }

  /** The output of one completed node. */
  async output<T = unknown>(runId: string, nodeId: string): Promise<T> {
    const { rows } = await settle(
      this.database.query(GET_OUTPUT, [checkRunId(runId), checkName(nodeId, 'nodeId')]),
      this.read(),
    );
    if (rows.length === 0) {
      await this.getRun(runId);
      throw new StepNotFoundError(runId, nodeId);
    }
    if (rows[0].state !== 'completed') {
      throw new InvalidStateError(
        `Node "${nodeId}" of run ${runId} has no output yet: it is ${rows[0].state}. Use result() to wait for the run.`,
        rows[0].state,
      );
    }
    return rows[0].output as T;
  }

  /**
   * Cancels the run and every unfinished step of it at once. A handler still
   * running learns at its next heartbeat; whatever it returns is dropped.
   * Returns false when the run had already completed or been cancelled.
   */
  async cancel(runId: string): Promise<boolean> {
    const { rows } = await settle(this.database.query(CANCEL_RUN, [checkRunId(runId)]), this.wrote([runId]));
    const previous = rows[0].previous;
    if (previous === null) throw new RunNotFoundError(runId);
    return previous !== 'completed' && previous !== 'cancelled';
  }

  /** Reopens one discarded node for one more attempt and carries its run on. */
  async retry(runId: string, nodeId: string): Promise<void> {
    const reopened = await this.reopen(runId, checkName(nodeId, 'nodeId'));
    if (reopened > 0) return;
    const { rows } = await settle(this.database.query(STEP_STATE, [runId, nodeId]), this.read());
    if (rows.length === 0) throw new StepNotFoundError(runId, nodeId);
    // Discarded and not reopened: a code workflow whose method has that failure in hand.
    if (rows[0].state === 'discarded') throw new InvalidStateError(messages.codeRetryRefused(runId, nodeId), 'discarded');
    throw new InvalidStateError(
      `Node "${nodeId}" of run ${runId} is ${rows[0].state}; only a discarded step can be retried` +
        (rows[0].state === 'cancelled' ? ' (a cancelled run stays cancelled).' : '.'),
      rows[0].state,
    );
  }

  /**
   * Makes a node that waits to run (a delayed enqueue, a retry's backoff, a
   * snooze) due now, without consuming an attempt, and wakes its queue; a
   * node of a paused run is due once the run resumes. Returns false when it
   * was due already. Throws `StepNotFoundError`, or `InvalidStateError` for
   * a node that is not waiting to run (running, finished, a sleep or a
   * signal wait).
   */
  async runNow(runId: string, nodeId: string): Promise<boolean> {
    checkRunId(runId);
    checkName(nodeId, 'nodeId');
    const { rows } = await settle(this.database.query(RUN_NOW, [runId, nodeId]), this.wrote([runId]));
    if (rows.length > 0) return true;
    const { rows: found } = await settle(this.database.query(STEP_STATE, [runId, nodeId]), this.read());
    const step = found.at(0);
    if (!step) {
      await this.getRun(runId);
      throw new StepNotFoundError(runId, nodeId);
    }
    const waiting = step.state === 'available' || (step.state === 'paused' && step.paused_state === 'available');
    if (step.node_type === 'step' && waiting && step.due) return false;
    throw new InvalidStateError(messages.notWaitingToRun(runId, nodeId, step.state), step.state);
  }

  /**
   * Starts a run of a registered workflow: a DAG (its graph is stored with
   * the run; root nodes move at once, the others wait for their upstream
   * nodes; every node's handler gets `input`), or a workflow written as code
   * (its method's node is available at once), by name or by reference.
   */
  async start<I, O>(workflow: WorkflowDefinition<I, O> | string, input: I, given?: StartOptions): Promise<string> {
    const start = prepareStart(workflow, input, given, {
      steps: this.registry,
      dagWorkflows: this.workflows,
      codeWorkflows: this.codeWorkflows,
      module: this.options,
      logger: this.logger,
    });
    const runId = uuid7();
    const wrote = this.wrote([runId]);
    const info = { operation: 'start', queue: start.queue, name: start.name } as const;
    const started = await this.tracer.produce(info, (traceContext) =>
      settle(start.insert(this.database, runId, traceContext), wrote),
    );
    if (started !== null) {
      this.stats.events.workflowStarted({ queue: start.queue, workflow: start.name });
      return started;
    }
    const keep = start.onConflict === 'keep' ? (holder: string) => holder : undefined;
    return this.heldBy(start.uniqueKey!, this.pooled(wrote), () => this.start(workflow, input, given), keep);
  }

  /**
   * Sends a signal to a run: the `waitForSignal` node named `name` completes
   * with `payload` as its output. A signal sent before the node waits is kept
   * and consumed when it does. Returns true when it completed a waiting node,
   * false when it was kept for later. Throws `RunNotFoundError`,
   * `UnknownSignalError`, or `InvalidStateError` when the run has finished,
   * the node already received its signal, or its wait timed out.
   */
  async signal(runId: string, name: string, payload: unknown = null): Promise<boolean> {
    checkRunId(runId);
    checkName(name, 'signal');
    const payloadJson = toJson(payload, 'signal payload', this.options.maxPayloadBytes);
    const { rows } = await settle(this.database.query(SIGNAL_RUN, [runId, name, payloadJson]), this.wrote([runId]));
    const outcome = rows[0].outcome;
    switch (outcome) {
      case 'delivered':
        return true;
      case 'stored':
        return false;
      case 'run_not_found':
        throw new RunNotFoundError(runId);
      case 'unknown_signal':
        throw new UnknownSignalError(runId, name);
      case 'already_signalled':
        throw new InvalidStateError(messages.signalRefused(runId, name, 'the node has already received its signal'), outcome);
      case 'node_discarded':
        throw new InvalidStateError(messages.signalRefused(runId, name, 'the wait timed out (retry the node to wait again)'), outcome);
      default: {
        const state = outcome.replace(/^(run|node)_/, '');
        throw new InvalidStateError(messages.signalRefused(runId, name, `the run is ${state}`), state);
      }
    }
  }

  /**
   * Pauses a running run: nothing of it is claimed, no timer of it fires and
   * no node below a finishing step moves until `resume`. Steps already
   * running finish. Returns false when the run was already paused; throws
   * `InvalidStateError` for a finished run.
   */
  async pause(runId: string): Promise<boolean> {
    const previous = await this.steer(PAUSE_RUN, runId);
    if (previous === 'running') return true;
    if (previous === 'paused') return false;
    throw new InvalidStateError(`Cannot pause run ${runId}: it is ${previous}.`, previous);
  }

  /**
   * Resumes a paused run where it stood. Returns false when it was not
   * paused (it may have finished meanwhile: running steps finish while paused).
   */
  async resume(runId: string): Promise<boolean> {
    return (await this.steer(RESUME_RUN, runId)) === 'paused';
  }

  /** Runs a pause or resume; returns the run's state before it. */
  private async steer(stmt: Statement<[runId: string], { previous: RunState | null }>, runId: string): Promise<RunState> {
    const { rows } = await settle(this.database.query(stmt, [checkRunId(runId)]), this.wrote([runId]));
    const previous = rows[0].previous;
    if (previous === null) throw new RunNotFoundError(runId);
    return previous;
  }

  /**
   * Stops claiming on a queue on every client; running steps finish. Returns
   * false when it was already paused; QueueNotFoundError for a queue that
   * does not exist (no client serves it, no step names it, no run is on it).
   */
  async pauseQueue(queue: string): Promise<boolean> {
    return this.changeQueue(PAUSE_QUEUE, checkName(queue, 'queue'));
  }

  /** Restarts claiming on a paused queue everywhere. Returns false when it was not paused. */
  async resumeQueue(queue: string): Promise<boolean> {
    return this.changeQueue(RESUME_QUEUE, checkName(queue, 'queue'));
  }

  private async changeQueue(change: typeof PAUSE_QUEUE | typeof RESUME_QUEUE, queue: string): Promise<boolean> {
    const { rows } = await settle(this.database.query(change, [queue]), this.wrote([]));
    if (!rows[0].known) throw new QueueNotFoundError(queue);
    return rows[0].changed;
  }

  /** The queues paused with pauseQueue. */
  async pausedQueues(): Promise<string[]> {
    const { rows } = await settle(this.database.query(PAUSED_QUEUES, []), this.read());
    return rows.map((r) => r.queue);
  }

  /**
   * This app's schedules, with their next tick and the last one fired (by
   * any replica; null before the first), from their durable state.
   */
  async listSchedules(): Promise<ScheduleInfo[]> {
    const schedules = this.schedules.all();
    if (schedules.length === 0) return [];
    const { rows } = await settle(this.database.query(SCHEDULE_STATE, [schedules.map((s) => s.name)]), this.read());
    const now = rows[0].now;
    const state = new Map(rows.filter((r) => r.name !== null).map((r) => [r.name, r]));
    return schedules.map((s) => {
      const lastTickAt = state.get(s.name)?.last_tick_at ?? null;
      const after = lastTickAt && lastTickAt > now ? lastTickAt : now;
      return { name: s.name, kind: s.kind, cron: s.cron, timezone: s.timezone, nextTickAt: s.nextAfter(after), lastTickAt };
    });
  }

  /** Reopens every discarded node of the run; returns how many. */
  async retryAll(runId: string): Promise<number> {
    return this.reopen(runId, null);
  }

  private async reopen(runId: string, nodeId: string | null): Promise<number> {
    checkRunId(runId);
    try {
      const { rows } = await this.database.query(RETRY_STEPS, [runId, nodeId]);
      const reopened = rows[0].reopened;
      if (reopened < 0) throw new RunNotFoundError(runId);
      return reopened;
    } catch (err) {
      if ((err as { code?: string }).code !== UNIQUE_VIOLATION) throw toCycloneError(err, this.wrote([runId]));
      // The run's unique key was taken by a newer run while this one was failed.
      const run = await this.getRun(runId);
      const { rows } = await settle(this.database.query(FIND_UNIQUE_HOLDER, [run.uniqueKey ?? '']), this.read());
      throw new DuplicateError(rows[0]?.id ?? 'unknown', run.uniqueKey ?? '');
    }
  }

  /** Checks an enqueue's arguments (its options, its input, its limits' keys) and makes its job, with a run id chosen now. */
  private prepare(kind: Kind, input: unknown, opts: EnqueueOptions | undefined): Omit<NewJob, 'traceContext'> {
    const step = this.registry.get(kindOf(kind));
    const params = jobParams(step, opts, this.options);
    return this.newJob(step, params, toJson(input, 'input', this.options.maxPayloadBytes), input);
  }

  private newJob(step: RegisteredStep, params: JobParams, inputJson: string, input: unknown): Omit<NewJob, 'traceContext'> {
    return {
      runId: uuid7(),
      params,
      inputJson,
      backoffMs: backoffSchedule(step, params.maxAttempts, this.logger),
      keys: flowKeys(step.kind, step.flow, input),
    };
  }

  /** `notify`: send the wake-up from the statement itself (inside a caller's transaction). */
  private async insertJob(job: NewJob, notify: boolean, query: Query): Promise<{ id: string; due: boolean }> {
    const rows = await query(ENQUEUE_JOB, enqueueJobValues(job, notify));
    if (rows.length > 0) return { id: rows[0].id, due: rows[0].due };
    const insertAgain = () => this.insertJob(job, notify, query);
    if (job.params.onConflict === 'error') return this.heldBy(job.params.uniqueKey!, query, insertAgain);
    return this.resolveConflict(job, query, insertAgain);
  }

  /**
   * onConflict 'keep' or 'replace', or a debounce: the holder is kept, given
   * the new input, or pushed back, under its run's lock; its run id is the
   * enqueue's result. A holder that started cannot be replaced: DuplicateError.
   */
  private async resolveConflict(
    job: NewJob,
    query: Query,
    insertAgain: () => Promise<{ id: string; due: boolean }>,
  ): Promise<{ id: string; due: boolean }> {
    const { params } = job;
    const key = params.uniqueKey!;
    const [{ holder, outcome }] = await query(UNIQUE_CONFLICT, [
      key,
      params.kind,
      params.onConflict === 'replace',
      job.inputJson,
      job.keys[0],
      job.keys[1],
      params.debounceMs,
    ]);
    if (holder === null) return insertAgain();
    if (outcome === 'started' && params.onConflict === 'replace') {
      throw new DuplicateError(holder, key, messages.replaceStarted(key, holder));
    }
    return { id: holder, due: false };
  }

  /**
   * After an insert that did nothing because its unique key is held: the
   * holder, read in a new statement (the insert's snapshot may predate the
   * holder's commit), is thrown as DuplicateError, or handed to `keep`; when
   * the holder finished between the two statements and freed the key, inserts again.
   */
  private async heldBy<T>(uniqueKey: string, query: Query, insertAgain: () => Promise<T>, keep?: (holder: string) => T): Promise<T> {
    const holder = await query(FIND_UNIQUE_HOLDER, [uniqueKey]);
    if (holder.length === 0) return insertAgain();
    if (keep) return keep(holder[0].id);
    throw new DuplicateError(holder[0].id, uniqueKey);
  }

  /** The Query of calls outside a caller's transaction: on the pool, its faults as the call's. */
  private pooled(context: CallFaultContext): Query {
    return async (stmt, params) => (await settle(this.database.query(stmt, params), context)).rows;
  }

  /** How the faults of a read are reported. */
  private read(): CallFaultContext {
    return { where: this.database.where, statementTimeoutMs: this.database.statementTimeoutMs, runIds: null };
  }

  /** How the faults of a write for `runIds` are reported: a lost connection leaves its outcome unknown. */
  private wrote(runIds: readonly string[]): CallFaultContext {
    return { ...this.read(), runIds };
  }
}

/** What the producer span of a job's enqueue is about. */
function producer(operation: 'enqueue' | 'enqueue_many', params: JobParams) {
  return { operation, queue: params.queue, name: params.kind };
}

/** SQLSTATE in_failed_sql_transaction: an earlier statement of the transaction failed. */
const IN_FAILED_TRANSACTION = '25P02';

function kindOf(kind: Kind): unknown {
  if (typeof kind === 'string') return kind;
  if (typeof kind !== 'object' || kind === null) return kind;
  try {
    return (kind as StepRef<any, any>).kind;
  } catch {
    return kind;
  }
}

function checkRunId(runId: unknown): string {
  if (typeof runId !== 'string') throw new RunNotFoundError(describeValue(runId));
  if (!UUID.test(runId)) throw new RunNotFoundError(runId);
  return runId;
}

function checkInputList(inputs: unknown): unknown[] {
  let list: unknown[] | undefined;
  let failure: unknown;
  try {
    // A copy, read once: a proxy, or an array changed meanwhile, cannot make the ids and the inputs disagree.
    if (Array.isArray(inputs)) list = Array.from(inputs);
  } catch (err) {
    failure = err;
  }
  if (!list) {
    const got = failure === undefined ? describeValue(inputs) : `a value that cannot be read (${errorMessage(failure)})`;
    throw new InvalidOptionError(`enqueueMany takes an array of inputs; got ${got}.`, failure);
  }
  return list;
}

/**
 * The query runner of the caller's open transaction: an EntityManager from
 * dataSource.transaction(...), or a QueryRunner after startTransaction().
 */
function openTransaction(tx: unknown): QueryRunner {
  try {
    if (typeof tx !== 'object' || tx === null) throw new NotInTransactionError();
    const runner = 'manager' in tx && 'isTransactionActive' in tx ? (tx as QueryRunner) : (tx as EntityManager).queryRunner;
    if (!runner?.isTransactionActive || typeof runner.query !== 'function') throw new NotInTransactionError();
    // TypeORM releases a query runner whose connection broke; its transaction is gone with it.
    if (runner.isReleased) throw new NotInTransactionError(messages.transactionGone());
    return runner;
  } catch (err) {
    if (err instanceof NotInTransactionError) throw err;
    throw new NotInTransactionError();
  }
}

function sinkOutputs(rows: { sink: boolean; node_id: string; output: unknown }[]): Record<string, unknown> {
  return Object.fromEntries(rows.filter((r) => r.sink).map((r) => [r.node_id, r.output]));
}
