import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** `result()` of a run that was cancelled. */
export class RunCancelledError extends CycloneError {
  constructor(readonly runId: string) {
    super('run_cancelled', messages.runCancelled(runId));
  }
}
