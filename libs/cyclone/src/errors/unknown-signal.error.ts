import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** A signal whose name is not a signal node of the run. */
export class UnknownSignalError extends CycloneError {
  constructor(
    readonly runId: string,
    readonly signal: string,
  ) {
    super('unknown_signal', messages.unknownSignal(runId, signal));
  }
}
