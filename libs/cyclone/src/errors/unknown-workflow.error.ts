import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** A workflow that was not registered with the module. */
export class UnknownWorkflowError extends CycloneError {
  /** `namesake`: a different definition with this name is registered. */
  constructor(
    readonly workflow: string,
    namesake = false,
  ) {
    super('unknown_workflow', namesake ? messages.workflowNamesake(workflow) : messages.unknownWorkflow(workflow));
  }
}
