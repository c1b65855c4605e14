import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** `result()` gave up waiting; the run goes on. */
export class ResultTimeoutError extends CycloneError {
  constructor(
    readonly runId: string,
    readonly state: string,
    timeoutMs: number,
  ) {
    super('result_timeout', messages.resultTimeout(runId, state, timeoutMs));
  }
}
