import type { WorkflowContext } from '../../interfaces/workflow-context.interface.js';
import type { RegisteredStep } from '../../steps/registered-step.js';

/** A discovered `@Workflow` method, its options checked. */
export interface RegisteredWorkflow {
  name: string;
  /** `Class.method`, for messages. */
  host: string;
  method: (input: unknown, wf: WorkflowContext) => unknown;
  /** The version runs started here record; this client runs runs of this version and older. */
  version: number;
  maxNodes: number;
  /**
   * The workflow's own node as a step: its kind is the workflow's name, its
   * options the workflow's, and its handler runs a pass of the method. A
   * claimed workflow node runs through the same execution as any step (lease,
   * heartbeat, timeout, outcome).
   */
  step: RegisteredStep;
}
