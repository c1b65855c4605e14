import type { Duration } from '../common/duration.js';
import type { SignalWaitOptions, SleepOptions, WorkflowStepOptions } from '../interfaces/workflow-options.interface.js';
import type { StepRef } from './define-step.js';

export type WorkflowNode =
  | { type: 'step'; id: string; kind: string; options: WorkflowStepOptions }
  | { type: 'signal'; id: string; options: SignalWaitOptions }
  | { type: 'sleep'; id: string; duration: Duration; options: SleepOptions };

/**
 * A workflow: nodes (steps to run, signals to wait for, timers) and the edges
 * between them, declared in code. Register it with
 * `CycloneModule.forRoot({ workflows: [...] })`; the module checks the graph
 * at startup, and every run stores a copy of it, so any worker can route it.
 * `I` is the run's input, which every node's handler receives.
 *
 * Without nodes it is a typed reference to a workflow written as code (a
 * `@Workflow` method of that name): `client.start(ref, input)` and
 * `client.result` check `I` and `O` at compile time.
 */
export class WorkflowDefinition<I = unknown, O = unknown> {
  private readonly declared: WorkflowNode[] = [];
  /** Type carriers only; never set at run time. */
  readonly __input?: I;
  readonly __output?: O;

  constructor(readonly name: string) {}

  get nodes(): readonly WorkflowNode[] {
    return this.declared;
  }

  /** A node that runs step `kind` (a `@Step` kind or a `defineStep` reference). */
  step(nodeId: string, kind: string | StepRef<any, any>, options: WorkflowStepOptions = {}): this {
    this.declared.push({ type: 'step', id: nodeId, kind: typeof kind === 'string' ? kind : kind?.kind, options });
    return this;
  }

  /** A node that waits for `client.signal(runId, nodeId, payload)`; its output is the payload. */
  waitForSignal(nodeId: string, options: SignalWaitOptions = {}): this {
    this.declared.push({ type: 'signal', id: nodeId, options });
    return this;
  }

  /** A node that waits `duration` once reached, on the database clock; its output is null. */
  sleep(nodeId: string, duration: Duration, options: SleepOptions = {}): this {
    this.declared.push({ type: 'sleep', id: nodeId, duration, options });
    return this;
  }
}

/**
 * A workflow of that name: declare a DAG with `.step()`, `.waitForSignal()`
 * and `.sleep()`, or leave it without nodes as the typed reference of a
 * workflow written as code, `defineWorkflow<Input, Output>('checkout')`,
 * for `@Workflow(ref)`, `client.start(ref, input)` and `wf.startChild`.
 */
export function defineWorkflow<I = unknown, O = unknown>(name: string): WorkflowDefinition<I, O> {
  return new WorkflowDefinition<I, O>(name);
}
