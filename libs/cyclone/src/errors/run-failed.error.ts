import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

export interface FailedStep {
  nodeId: string;
  error: string | null;
  errorKind: string | null;
}

/** `result()` of a run that failed: a step was discarded. */
export class RunFailedError extends CycloneError {
  constructor(
    readonly runId: string,
    readonly failedSteps: FailedStep[],
  ) {
    super('run_failed', messages.runFailed(runId, failedSteps));
  }
}
