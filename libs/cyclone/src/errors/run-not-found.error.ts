import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

export class RunNotFoundError extends CycloneError {
  constructor(readonly runId: string) {
    super('run_not_found', messages.runNotFound(runId));
  }
}
