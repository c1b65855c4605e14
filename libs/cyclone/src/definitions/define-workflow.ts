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
 */
export class WorkflowDefinition<I = unknown> {
  private readonly declared: WorkflowNode[] = [];
  /** Type carrier only; never set at run time. */
  readonly __input?: I;

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

export function defineWorkflow<I = unknown>(name: string): WorkflowDefinition<I> {
  return new WorkflowDefinition<I>(name);
}
