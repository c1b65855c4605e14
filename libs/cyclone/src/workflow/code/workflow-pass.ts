import type { Logger } from '@nestjs/common';
import { optionalPositiveMs, toMs, type Duration } from '../../common/duration.js';
import { errorMessage } from '../../common/error-message.js';
import { isInstance } from '../../common/is-instance.js';
import { stackOf } from '../../common/stack-of.js';
import { checkInteger, checkName, checkOptions, toJson } from '../../common/validate.js';
import { messages } from '../../cyclone.messages.js';
import { MAX_ATTEMPTS_LIMIT } from '../../cyclone.constants.js';
import type { CycloneDatabase } from '../../database/cyclone-database.js';
import { CycloneError } from '../../errors/cyclone.error.js';
import { DuplicateNodeError } from '../../errors/duplicate-node.error.js';
import { InvalidOptionError } from '../../errors/invalid-option.error.js';
import { NodeLimitError } from '../../errors/node-limit.error.js';
import { NonDeterminismError } from '../../errors/non-determinism.error.js';
import { PermanentError, permanent } from '../../errors/permanent.error.js';
import { StepFailedError } from '../../errors/step-failed.error.js';
import type {
  ChildOptions,
  InlineContext,
  InlineOptions,
  SignalWaitCallOptions,
  WorkflowStepCallOptions,
} from '../../interfaces/workflow-context.interface.js';
import type { StepContext } from '../../interfaces/step-context.interface.js';
import { LOAD_HISTORY, RECORD_NODES, type RecordedNodeRow, type RecordedRow } from '../../sql/code-workflow.sql.js';
import type { NodeType, StepState } from '../../sql/names.js';
import { flowKeys } from '../../steps/flow-limits.js';
import { jobParams } from '../../steps/job-params.js';
import { backoffSchedule } from '../../steps/retry-policy.js';
import { childSpec, type ChildTargets } from './child-target.js';
import { childRunId, describeNode, label } from './call-names.js';
import { inlineAttempt, inlineBackoff, type InlineOutcome, type InlineSettings } from './inline-attempt.js';
import { takeBatch, type NodeOp } from './node-op.js';
import { PassEnded } from './pass-ended.js';
import type { RegisteredWorkflow } from './registered-workflow.js';
import { ResolutionQueue } from './resolution-queue.js';

const INLINE_OPTION_NAMES = ['maxAttempts', 'timeout', 'backoff'] as const;
const STEP_CALL_OPTION_NAMES = ['queue', 'priority', 'timeout', 'maxAttempts', 'maxReclaims'] as const;
const SIGNAL_OPTION_NAMES = ['timeout'] as const;

const FINISHED: ReadonlySet<StepState> = new Set(['completed', 'discarded', 'cancelled']);

/**
 * A pass that suspends having recorded nothing (its method still waits on
 * the rest of what it waited on) delays the next one's start this long
 * after the wake-up, doubling while passes keep recording nothing, up to
 * the cap: a fan-out's finishes are taken a batch a pass (see wake-workflows.sql).
 */
const FIRST_WAKE_DELAY_MS = 50;
const MAX_WAKE_DELAY_MS = 5_000;

/** A call of the method that waits for its node to finish. */
interface Waiter {
  resolve: (output: unknown) => void;
  reject: (error: unknown) => void;
  /** An inline call: what to run when its retry comes due. */
  inline?: { fn: (ctx: InlineContext) => unknown; options: InlineSettings };
}

/** What a pass needs besides the workflow and its claimed node. */
export interface PassDeps extends ChildTargets {
  database: CycloneDatabase;
  /** This client's id: the lease owner of the workflow's node. */
  owner: string;
}

/**
 * One pass of a workflow written as code: a claimed attempt of its node. It
 * loads what the run recorded (one statement), runs the method from the top
 * and answers its durable calls: a recorded call gets its recorded result
 * (in the order the run learned of results, see ResolutionQueue), a new one
 * is recorded (inline calls run here first). Calls made together are written
 * together, a fan-out of a thousand steps in one statement. When the method
 * has nothing left to do but wait for nodes that are not finished, and no
 * inline call runs, the last write suspends the workflow: the pass ends, the
 * worker slot is free, and the method's promise is left behind; the first
 * awaited node to finish makes the workflow available for the next pass.
 *
 * Every write is a compare-and-set on the pass's lease; a pass whose lease
 * is gone writes nothing more and ends. A misuse the method cannot fix by
 * running again (a name used twice, a call that does not match the record,
 * more nodes than maxNodes, a bad argument) ends the pass at once, whatever
 * the method does with the error, and fails the run: the node is discarded
 * as by a PermanentError, nothing of the call written.
 */
export class WorkflowPass {
  private readonly runId: string;
  private readonly generation: string;
  private readonly history = new Map<string, RecordedNodeRow>();
  /** Recorded names the method has called in this pass. */
  private readonly reached = new Set<string>();
  /** Names called in this pass, with what they were called as. */
  private readonly used = new Map<string, NodeType>();
  private readonly patches = new Map<string, boolean>();
  /** The run ids of this run's children, which wf.result may wait for. */
  private readonly children = new Set<string>();
  /** Calls whose nodes have not finished. */
  private readonly waiting = new Map<string, Waiter>();
  private readonly results = new ResolutionQueue();
  private ops: NodeOp[] = [];
  private inline = 0;
  private writing = false;
  /** The next place in the order the run learns of results. */
  private nextObserved = 1;
  private nodes = 0;
  /** The delay the last suspension asked of its wake-up, and whether this pass has recorded anything. */
  private lastWakeDelayMs = 0;
  private recordedAny = false;
  private fatal?: CycloneError;
  private returned?: { ok: true; value: unknown } | { ok: false; error: unknown };
  private ended = false;
  private tickQueued = false;
  private warnedIdle = false;
  /** Aborts inline calls when the pass ends, or when its own signal does. */
  private readonly stop = new AbortController();
  private finish!: (result: { value: unknown } | { error: unknown }) => void;
  private readonly done = new Promise<{ value: unknown } | { error: unknown }>((resolve) => (this.finish = resolve));

  constructor(
    private readonly workflow: RegisteredWorkflow,
    private readonly ctx: StepContext,
    private readonly deps: PassDeps,
    private readonly logger: Logger,
  ) {
    this.runId = ctx.runId;
    this.generation = String(ctx.fencingToken);
    ctx.signal.addEventListener('abort', () => this.schedule(), { once: true });
  }

  get signal(): AbortSignal {
    return this.stop.signal;
  }

  /**
   * Runs the pass, the method getting the context `makeContext` makes for
   * the run's version: the method's output, or a PassEnded; throws what
   * fails the attempt.
   */
  async run(input: unknown, makeContext: (version: number) => unknown): Promise<unknown> {
    let rows: RecordedNodeRow[];
    try {
      ({ rows } = await this.deps.database.query(LOAD_HISTORY, [this.runId, this.workflow.name, this.deps.owner, this.generation]));
    } catch (err) {
      this.logger.error(`Could not load the history of run ${this.runId}: ${errorMessage(err)}`);
      return new PassEnded('unrecorded');
    }
    if (rows.length === 0) return new PassEnded('lease_lost');
    for (const row of rows.slice(1)) {
      this.history.set(row.node_id, row);
      if (row.node_type === 'child' && typeof row.output === 'string') this.children.add(row.output);
      if (row.observed !== null) this.nextObserved = Math.max(this.nextObserved, row.observed + 1);
    }
    this.nodes = rows.length;
    this.lastWakeDelayMs = rows[0].wake_delay_ms ?? 0;
    const context = makeContext(rows[0].version ?? this.workflow.version);
    Promise.resolve()
      .then(() => this.workflow.method(input, context as never))
      .then(
        (value) => this.settle({ ok: true, value }),
        (error: unknown) => this.settle({ ok: false, error }),
      );
    const result = await this.done;
    if ('error' in result) throw result.error;
    return result.value;
  }

  // ---- the durable calls (WorkflowContextImpl forwards here) ----

  runInline<T>(name: unknown, fn: unknown, given: InlineOptions | undefined): Promise<T> {
    return this.guard(() => {
      const where = `options of wf.run(${label(name)})`;
      const options = checkOptions<InlineOptions>(given, where, INLINE_OPTION_NAMES);
      if (typeof fn !== 'function') throw new InvalidOptionError(`wf.run(${label(name)}) takes a function to run; got ${typeof fn}.`);
      if (options.backoff !== undefined && typeof options.backoff !== 'function') {
        throw new InvalidOptionError(`Option "backoff" of wf.run(${label(name)}) must be a function (attempt) => Duration.`);
      }
      const settings: InlineSettings = {
        maxAttempts: options.maxAttempts === undefined ? 1 : checkInteger(options.maxAttempts, 'maxAttempts', 1, MAX_ATTEMPTS_LIMIT),
        timeoutMs: optionalPositiveMs(options.timeout, 'timeout'),
        backoff: options.backoff,
      };
      const node = this.call(name, 'run');
      return this.wait<T>(node.name, node.recorded, (output) => output as T, (waiter) => {
        waiter.inline = { fn: fn as (ctx: InlineContext) => unknown, options: settings };
        if (!node.recorded) this.startInline(node.name, waiter, 1, settings.maxAttempts);
        else if (node.recorded.state === 'pending') {
          this.startInline(node.name, waiter, node.recorded.attempt, Math.max(node.recorded.max_attempts, settings.maxAttempts));
        }
      });
    });
  }

  step<T>(name: unknown, kind: unknown, input: unknown, given: WorkflowStepCallOptions | undefined): Promise<T> {
    return this.guard(() => {
      const kindName = typeof kind === 'object' && kind !== null ? (kind as { kind?: unknown }).kind : kind;
      const node = this.call(name, 'step', kindName);
      if (node.recorded) return this.wait<T>(node.name, node.recorded, (output) => output as T, () => undefined);
      const where = `options of wf.step(${label(name)})`;
      const step = this.deps.steps.get(kindName);
      const p = jobParams(step, checkOptions(given, where, STEP_CALL_OPTION_NAMES), this.deps.module, where);
      const op: NodeOp = {
        op: 'step',
        name: node.name,
        input: toJson(input, `input of wf.step(${label(name)})`, this.deps.module.maxPayloadBytes),
        finishes: false,
        fields: {
          kind: step.kind,
          queue: p.queue,
          priority: p.priority,
          max_attempts: p.maxAttempts,
          max_reclaims: p.maxReclaims,
          timeout_ms: p.timeoutMs,
          backoff_ms: backoffSchedule(step, p.maxAttempts, this.logger),
          ...keys(flowKeys(step.kind, step.flow, input)),
        },
      };
      return this.wait<T>(node.name, undefined, (output) => output as T, () => this.ops.push(op));
    });
  }

  sleep(name: unknown, duration: Duration): Promise<void> {
    return this.guard(() => {
      const ms = toMs(duration, `duration of wf.sleep(${label(name)})`);
      const node = this.call(name, 'sleep');
      return this.wait<void>(node.name, node.recorded, () => undefined, () => {
        if (!node.recorded || node.recorded.state === 'pending') {
          this.ops.push({ op: 'sleep', name: node.name, finishes: false, fields: { wait_ms: ms } });
        }
      });
    });
  }

  waitForSignal<T>(name: unknown, given: SignalWaitCallOptions | undefined): Promise<T> {
    return this.guard(() => {
      const options = checkOptions<SignalWaitCallOptions>(given, `options of wf.waitForSignal(${label(name)})`, SIGNAL_OPTION_NAMES);
      const timeoutMs = optionalPositiveMs(options.timeout, 'timeout') ?? null;
      const node = this.call(name, 'signal');
      return this.wait<T>(node.name, node.recorded, (output) => output as T, () => {
        if (!node.recorded || node.recorded.state === 'pending') {
          this.ops.push({ op: 'signal', name: node.name, finishes: false, fields: { wait_ms: timeoutMs } });
        }
      });
    });
  }

  startChild(name: unknown, target: unknown, input: unknown, given: ChildOptions | undefined): Promise<string> {
    return this.guard(() => {
      const where = `options of wf.startChild(${label(name)})`;
      const spec = childSpec(target, input, given, this.deps, where);
      const node = this.call(name, 'child', spec.kind);
      if (node.recorded) return this.wait<string>(node.name, node.recorded, (output) => output as string, () => undefined);
      const inputJson = toJson(input, `input of wf.startChild(${label(name)})`, this.deps.module.maxPayloadBytes);
      const childId = childRunId(this.runId);
      this.children.add(childId);
      return this.wait<string>(node.name, undefined, (output) => output as string, (waiter) => {
        this.waiting.delete(node.name);
        this.ops.push({
          op: 'child',
          name: node.name,
          input: inputJson,
          finishes: true,
          fields: { kind: spec.kind, run_id: childId, ...spec.fields },
          written: (observed) => this.results.push(observed!, () => waiter.resolve(childId)),
        });
      });
    });
  }

  result<T>(runId: unknown): Promise<T> {
    return this.guard(() => {
      const name = checkName(runId, 'run id of wf.result');
      if (!this.children.has(name)) throw new InvalidOptionError(messages.notAChild(this.runId, name));
      const node = this.call(name, 'result');
      return this.wait<T>(node.name, node.recorded, (output) => output as T, () => {
        if (!node.recorded || node.recorded.state === 'pending') {
          this.ops.push({ op: 'result', name: node.name, input: JSON.stringify(name), finishes: false, fields: {} });
        }
      });
    });
  }

  patched(id: unknown): boolean {
    if (this.ended) throw this.fatal ?? new PermanentError(`The pass of run ${this.runId} has ended.`);
    try {
      const name = checkName(id, 'patch id');
      if (this.used.get(name) === 'patch') return this.patches.get(name)!;
      const node = this.call(name, 'patch');
      // A run that recorded calls this pass has not reached yet went past this
      // point before the patch existed: it keeps its old path.
      const value = node.recorded ? node.recorded.output === true : [...this.history.keys()].every((n) => this.reached.has(n));
      this.patches.set(name, value);
      if (!node.recorded) this.ops.push({ op: 'patch', name, output: JSON.stringify(value), finishes: false, fields: {} });
      this.schedule();
      return value;
    } catch (err) {
      throw this.fail(err);
    }
  }

  // ---- bookkeeping of calls ----

  /** Checks a call against this pass and the record: its name, its use, its kind, the node limit. */
  private call(name: unknown, type: NodeType, kind?: unknown): { name: string; recorded?: RecordedNodeRow } {
    const node = checkName(name, 'node name');
    if (this.used.has(node) || node === this.workflow.name) {
      throw new DuplicateNodeError(this.workflow.name, this.runId, node);
    }
    this.used.set(node, type);
    const recorded = this.history.get(node);
    if (recorded) {
      if (recorded.node_type !== type || (kind !== undefined && recorded.kind !== kind)) {
        throw new NonDeterminismError(this.workflow.name, this.runId, node, describeNode(recorded.node_type, recorded.kind), describeNode(type, kind));
      }
      this.reached.add(node);
      return { name: node, recorded };
    }
    this.nodes += 1;
    if (this.nodes > this.workflow.maxNodes) throw new NodeLimitError(this.workflow.name, this.runId, this.workflow.maxNodes);
    return { name: node };
  }

  /**
   * The promise a call returns: a recorded finished node's result, in its
   * turn; otherwise the call waits for its node (`start` records or runs it).
   */
  private wait<T>(
    name: string,
    recorded: RecordedNodeRow | undefined,
    map: (output: unknown) => T,
    start: (waiter: Waiter) => void,
  ): Promise<T> {
    const promise = new Promise<T>((resolve, reject) => {
      const waiter: Waiter = { resolve: (output) => resolve(map(output)), reject };
      if (recorded && FINISHED.has(recorded.state)) {
        this.results.push(recorded.observed ?? 0, () => this.settleNode(name, recorded, waiter));
      } else {
        this.waiting.set(name, waiter);
        start(waiter);
      }
      this.schedule();
    });
    // A call the method never awaits (fire and forget) must not crash the
    // process when it fails; the method, if it awaits, still gets the error.
    promise.catch(() => undefined);
    return promise;
  }

  private settleNode(name: string, row: { state: string; output: unknown; error: string | null; error_kind: string | null }, waiter: Waiter): void {
    if (row.state === 'completed') waiter.resolve(row.output);
    else waiter.reject(new StepFailedError(this.runId, name, row.error, row.state === 'cancelled' ? 'cancelled' : ((row.error_kind as never) ?? 'error')));
  }

  /** Runs `work` (a call's checks and bookkeeping); a misuse ends the pass and fails the run. */
  private guard<T>(work: () => Promise<T>): Promise<T> {
    if (this.ended) return new Promise<T>(() => undefined);
    try {
      return work();
    } catch (err) {
      const rejected = Promise.reject(this.fail(err));
      rejected.catch(() => undefined);
      return rejected;
    }
  }

  private fail(err: unknown): unknown {
    // A bad call is the code's, and would be made again by every replay.
    if (err instanceof CycloneError) {
      this.fatal ??= err;
      this.schedule();
    }
    return err;
  }

  // ---- inline calls ----

  private startInline(name: string, waiter: Waiter, attempt: number, maxAttempts: number): void {
    const { fn, options } = waiter.inline!;
    this.inline += 1;
    inlineAttempt(fn, options, attempt, Number(this.generation), this.stop.signal)
      .then((outcome) => {
        if (this.ended) return;
        if (outcome.ok) this.inlineReturned(name, waiter, outcome.value, { attempt, max_attempts: maxAttempts, ran_ms: outcome.ranMs });
        else this.inlineThrew(name, waiter, outcome, attempt, maxAttempts);
      })
      .finally(() => {
        this.inline -= 1;
        this.schedule();
      });
  }

  private inlineReturned(name: string, waiter: Waiter, value: unknown, fields: Record<string, unknown>): void {
    let output: string;
    try {
      output = toJson(value ?? null, `result of wf.run(${label(name)})`, this.deps.module.maxPayloadBytes);
    } catch (err) {
      // The method gets the error, and the run fails whatever it does with it.
      this.waiting.delete(name);
      waiter.reject(this.fail(err));
      return;
    }
    this.waiting.delete(name);
    this.ops.push({
      op: 'run',
      name,
      output,
      finishes: true,
      fields: { ...fields, state: 'completed' },
      // What a replay will return: the recorded JSON, not the value itself.
      written: (observed) => this.results.push(observed!, () => waiter.resolve(JSON.parse(output))),
    });
  }

  private inlineThrew(name: string, waiter: Waiter, outcome: InlineOutcome & { ok: false }, attempt: number, maxAttempts: number): void {
    const { errorKind, ranMs } = outcome;
    const message = errorMessage(outcome.error);
    // The attempt is kept with its stack, as a step's failed attempt is (record-nodes.sql).
    const fields = { attempt, max_attempts: maxAttempts, ran_ms: ranMs, error: message, error_kind: errorKind, stack: stackOf(outcome.error) };
    if (errorKind !== 'permanent' && attempt < maxAttempts) {
      // Retried after its backoff, on a timer: the workflow waits for it without a worker.
      this.logger.warn(`wf.run(${label(name)}) of run ${this.runId} attempt ${attempt} failed (${errorKind}): ${message}; retrying`);
      const waitMs = inlineBackoff(waiter.inline!.options, `wf.run(${label(name)})`, attempt, this.logger);
      this.ops.push({ op: 'run', name, finishes: false, fields: { ...fields, state: 'waiting_timer', wait_ms: waitMs } });
      return;
    }
    this.waiting.delete(name);
    this.ops.push({
      op: 'run',
      name,
      finishes: true,
      fields: { ...fields, state: 'discarded' },
      written: (observed) =>
        this.results.push(observed!, () => waiter.reject(new StepFailedError(this.runId, name, message, errorKind))),
    });
  }

  // ---- the pass's progress ----

  private settle(outcome: { ok: true; value: unknown } | { ok: false; error: unknown }): void {
    this.returned = outcome;
    this.schedule();
  }

  /**
   * Looks at the pass once the method has run as far as it can (on the next
   * turn of the event loop, after its continuations): one thing at a time,
   * a result to hand it, a batch to write, or the end.
   */
  private schedule(): void {
    if (this.tickQueued || this.ended) return;
    this.tickQueued = true;
    setImmediate(() => {
      this.tickQueued = false;
      this.tick();
    });
  }

  private tick(): void {
    if (this.ended || this.writing) return;
    if (this.ctx.signal.aborted) return this.end({ value: new PassEnded('lease_lost') });
    if (this.fatal) return this.end({ error: new PermanentError(this.fatal.message, { cause: this.fatal }) });
    const next = this.results.shift();
    if (next) {
      next();
      return this.schedule();
    }
    if (this.returned) {
      if (this.ops.length > 0) return void this.write(false);
      if (this.inline > 0) return;
      return this.end(this.outcome(this.returned));
    }
    if (this.ops.length > 0) return void this.write(this.inline === 0 && this.ops.every((op) => !op.finishes));
    if (this.inline > 0) return;
    if (this.waiting.size > 0) return void this.write(true);
    if (!this.warnedIdle) {
      this.warnedIdle = true;
      this.logger.warn(messages.nonDurableWait(this.workflow.name, this.runId));
    }
  }

  /** What the method's return or throw makes of the attempt. */
  private outcome(returned: { ok: true; value: unknown } | { ok: false; error: unknown }): { value: unknown } | { error: unknown } {
    if (returned.ok) {
      try {
        toJson(returned.value ?? null, `output of workflow "${this.workflow.name}"`, this.deps.module.maxPayloadBytes);
      } catch (err) {
        // Returned again by every replay: retrying cannot help.
        return { error: permanent(err) };
      }
      return { value: returned.value ?? null };
    }
    // A recorded failure the method let through is thrown again by every replay.
    if (isInstance(returned.error, StepFailedError)) return { error: permanent(returned.error) };
    return { error: returned.error };
  }

  /**
   * Writes the ops made so far (a batch), with `suspend` when the method has
   * nothing else to do: it then waits for every call still waiting.
   */
  private async write(suspend: boolean): Promise<void> {
    this.writing = true;
    const { batch, json, numbered, next: observed } = takeBatch(this.ops, this.nextObserved);
    const last = this.ops.length === 0;
    const awaited = suspend && last ? [...this.waiting.keys()] : [];
    if (batch.length > 0) this.recordedAny = true;
    const wakeDelayMs = this.recordedAny
      ? 0
      : Math.min(this.lastWakeDelayMs === 0 ? FIRST_WAKE_DELAY_MS : 2 * this.lastWakeDelayMs, MAX_WAKE_DELAY_MS);
    let rows: RecordedRow[];
    try {
      ({ rows } = await this.deps.database.query(RECORD_NODES, [
        this.runId,
        this.workflow.name,
        this.deps.owner,
        this.generation,
        json,
        observed,
        suspend && last,
        awaited,
        wakeDelayMs,
      ]));
    } catch (err) {
      this.writing = false;
      this.logger.error(`Could not record the calls of run ${this.runId}: ${errorMessage(err)}`);
      return this.end({ value: new PassEnded('unrecorded') });
    }
    this.writing = false;
    const status = rows[rows.length - 1].state;
    if (status === 'lost') return this.end({ value: new PassEnded('lease_lost') });
    this.nextObserved = observed;
    batch.forEach((op, i) => op.written?.(numbered[i]));
    for (const row of rows.slice(0, -1)) this.finished(row);
    if (status === 'suspended') return this.end({ value: new PassEnded('suspended') });
    if (suspend && last && rows.length === 1) {
      // Asked to suspend and told to go on, with nothing to go on with: never loop on it.
      this.logger.error(`Run ${this.runId}: the suspension found nothing to wait for; the pass ends unrecorded.`);
      return this.end({ value: new PassEnded('unrecorded') });
    }
    this.schedule();
  }

  /** A node that finished for the pass (or an inline call whose retry is due). */
  private finished(row: RecordedRow): void {
    const name = row.node_id!;
    const waiter = this.waiting.get(name);
    if (!waiter) return;
    if (row.state === 'pending' && waiter.inline) {
      this.startInline(name, waiter, row.attempt!, row.max_attempts!);
      return;
    }
    if (row.observed === null) return;
    this.waiting.delete(name);
    this.nextObserved = Math.max(this.nextObserved, row.observed + 1);
    this.results.push(row.observed, () => this.settleNode(name, row, waiter));
  }

  private end(result: { value: unknown } | { error: unknown }): void {
    if (this.ended) return;
    this.ended = true;
    this.stop.abort(new PermanentError(`The pass of run ${this.runId} has ended.`));
    this.finish(result);
  }
}

function keys([flowKey, rateKey]: [string | null, string | null]): { flow_key: string | null; rate_key: string | null } {
  return { flow_key: flowKey, rate_key: rateKey };
}
