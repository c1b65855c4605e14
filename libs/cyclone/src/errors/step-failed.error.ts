import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';
import type { ErrorKind } from '../sql/names.js';

/**
 * A durable call of a code workflow failed: its step was discarded, its
 * inline call ran out of attempts, its signal wait timed out, or the child it
 * waited on failed or was cancelled. Thrown into the workflow's method, as
 * often as a replay meets the call, so the method may catch it (compensation).
 */
export class StepFailedError extends CycloneError {
  constructor(
    readonly runId: string,
    readonly nodeId: string,
    /** The node's recorded error. */
    readonly error: string | null,
    readonly errorKind: ErrorKind | 'cancelled',
  ) {
    super('step_failed', messages.stepFailed(runId, nodeId, errorKind, error));
  }
}
