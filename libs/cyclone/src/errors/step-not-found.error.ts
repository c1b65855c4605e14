import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

export class StepNotFoundError extends CycloneError {
  constructor(
    readonly runId: string,
    readonly nodeId: string,
  ) {
    super('step_not_found', messages.stepNotFound(runId, nodeId));
  }
}
