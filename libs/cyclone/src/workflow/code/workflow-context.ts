import type { Logger } from '@nestjs/common';
import type { Duration } from '../../common/duration.js';
import type {
  ChildOptions,
  InlineContext,
  InlineOptions,
  RunHandle,
  SignalWaitCallOptions,
  WorkflowContext,
  WorkflowStepCallOptions,
} from '../../interfaces/workflow-context.interface.js';
import type { WorkflowPass } from './workflow-pass.js';

/** The `wf` a workflow method gets: its pass's calls, and nothing else of the pass. */
export class WorkflowContextImpl implements WorkflowContext {
  readonly signal: AbortSignal;

  constructor(
    private readonly pass: WorkflowPass,
    readonly runId: string,
    readonly workflow: string,
    readonly version: number,
    readonly input: unknown,
    readonly logger: Logger,
  ) {
    this.signal = pass.signal;
  }

  run<T>(name: string, fn: (ctx: InlineContext) => T | Promise<T>, options?: InlineOptions): Promise<Awaited<T>> {
    return this.pass.runInline(name, fn, options);
  }

  step(name: string, kind: unknown, input: unknown, options?: WorkflowStepCallOptions): Promise<any> {
    return this.pass.step(name, kind, input, options);
  }

  sleep(name: string, duration: Duration): Promise<void> {
    return this.pass.sleep(name, duration);
  }

  waitForSignal<T = unknown>(name: string, options?: SignalWaitCallOptions): Promise<T> {
    return this.pass.waitForSignal(name, options);
  }

  startChild(name: string, target: unknown, input: unknown, options?: ChildOptions): Promise<RunHandle<any>> {
    return this.pass.startChild(name, target, input, options);
  }

  result<O>(runId: RunHandle<O>): Promise<O> {
    return this.pass.result(runId);
  }

  patched(id: string): boolean {
    return this.pass.patched(id);
  }
}
