import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** A workflow graph that cannot run; raised when the module starts. */
export class InvalidWorkflowError extends CycloneError {
  constructor(
    readonly workflow: string,
    readonly nodeId: string | null,
    problem: string,
  ) {
    super('invalid_workflow', messages.invalidWorkflow(workflow, nodeId, problem));
  }
}
