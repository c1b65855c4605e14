import type { Logger } from '@nestjs/common';
import type { Duration } from '../common/duration.js';
import type { StepInput, StepOutput, StepRef } from '../definitions/define-step.js';
import type { WorkflowDefinition } from '../definitions/define-workflow.js';
import type { BackoffFunction } from './step-options.interface.js';

/** The run id of a child run (`wf.startChild`), carrying its output's type for `wf.result`. */
export type RunHandle<O = unknown> = string & { readonly __output?: O };

/** What an inline call's function (`wf.run`) learns about the attempt it runs. */
export interface InlineContext {
  /** The attempt now running, from 1. */
  readonly attempt: number;
  /** Aborts at the call's timeout, and when the workflow's pass must stop (its lease lost, cancel, shutdown). */
  readonly signal: AbortSignal;
  /** The workflow pass's lease generation: fence external writes with it, as a step's `ctx.fencingToken`. */
  readonly fencingToken: number;
}

/** Options of an inline call (`wf.run`). */
export interface InlineOptions {
  /** Attempts of the function before the call fails with StepFailedError. Default 1. */
  maxAttempts?: number;
  /** Per attempt, on the worker's clock: the function's signal aborts and the attempt fails as a timeout. */
  timeout?: Duration;
  /** The wait before a retry (durable: a timer, not the worker). Default: exponential from 1 s. */
  backoff?: BackoffFunction;
}

/** Options of a step run as a node of its own (`wf.step`): the enqueue options that make sense per node. */
export interface WorkflowStepCallOptions {
  queue?: string;
  priority?: number;
  timeout?: Duration;
  maxAttempts?: number;
  maxReclaims?: number;
}

/** Options of a child run (`wf.startChild`); a child that is a step kind also takes a step's options. */
export interface ChildOptions extends WorkflowStepCallOptions {
  /** How long the finished child run is kept. */
  retention?: Duration;
}

export interface SignalWaitCallOptions {
  /** How long to wait; past it the call throws StepFailedError with errorKind 'signal_timeout'. Default: forever. */
  timeout?: Duration;
}

/** What `wf.startChild` can start: a workflow (code or DAG, by reference or name) or a step kind. */
export type ChildTarget = WorkflowDefinition<any, any> | StepRef<any, any> | string;
export type ChildInput<T> =
  T extends WorkflowDefinition<infer I, any> ? I : T extends StepRef<infer I, any> ? I : unknown;
export type ChildOutput<T> =
  T extends WorkflowDefinition<any, infer O> ? O : T extends StepRef<any, infer O> ? O : unknown;

/**
 * What a workflow method (`@Workflow`) gets besides its input: its durable
 * calls. Each call is a node of the run named by its first argument, unique
 * in the run, recorded once: when the method runs again (after a crash, a
 * retry or a wake-up) a recorded call returns its recorded output, or throws
 * its recorded failure as StepFailedError, and does not do its work again.
 *
 * The code between calls must do the same every time it runs: whatever
 * reads a clock, draws a random number or an id, or does I/O belongs in
 * `wf.run`.
 */
export interface WorkflowContext<RunInput = unknown> {
  readonly runId: string;
  /** The workflow's name. */
  readonly workflow: string;
  /** The version of the workflow that started this run (see `wf.patched`). */
  readonly version: number;
  /** The run's input. */
  readonly input: RunInput;
  /**
   * Aborts when this pass must stop: its lease was lost, the run cancelled,
   * its timeout reached, or the worker shuts down.
   */
  readonly signal: AbortSignal;
  /** Logs of the workflow; a replay logs again what its first run logged. */
  readonly logger: Logger;

  /** Runs `fn` here, in the workflow's own worker, and records its result (JSON) once. */
  run<T>(name: string, fn: (ctx: InlineContext) => T | Promise<T>, options?: InlineOptions): Promise<Awaited<T>>;
  /** Runs a registered step kind as a node of its own, on any worker, with its own lease, retries and timeout. */
  step<S extends string | StepRef<any, any>>(
    name: string,
    kind: S,
    input: StepInput<S>,
    options?: WorkflowStepCallOptions,
  ): Promise<StepOutput<S>>;
  /** Waits `duration`, on the database clock, without holding a worker. */
  sleep(name: string, duration: Duration): Promise<void>;
  /**
   * Waits for `client.signal(runId, name, payload)` and returns its payload.
   * A signal sent before the method got here is kept and returned at once.
   */
  waitForSignal<T = unknown>(name: string, options?: SignalWaitCallOptions): Promise<T>;
  /**
   * Starts a run of a workflow or a step kind as this run's child (cancelled
   * with it) and returns its run id once that is recorded; `wf.result` waits for it.
   */
  startChild<T extends ChildTarget>(
    name: string,
    target: T,
    input: ChildInput<T>,
    options?: ChildOptions,
  ): Promise<RunHandle<ChildOutput<T>>>;
  /**
   * Waits for a child run of this run to finish and returns its output; a
   * child that failed or was cancelled throws StepFailedError. The node is
   * named by the child's run id.
   */
  result<O>(runId: RunHandle<O>): Promise<O>;
  /**
   * Whether this run takes the path of a change made after it started: true
   * for a run that reaches this call beyond what it has recorded, false for
   * one that replays past this point (it started before the change). The
   * answer is recorded on the first call and never changes.
   */
  patched(id: string): boolean;
}
