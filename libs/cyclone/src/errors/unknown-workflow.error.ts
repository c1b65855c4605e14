import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** A workflow that was not registered with the module. */
export class UnknownWorkflowError extends CycloneError {
  constructor(readonly workflow: string) {
    super('unknown_workflow', messages.unknownWorkflow(workflow));
  }
}
