import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** An enqueue with a `unique` key that an unfinished run already holds. */
export class DuplicateError extends CycloneError {
  constructor(
    /** The run that holds the key. */
    readonly runId: string,
    readonly uniqueKey: string,
    message = messages.duplicate(uniqueKey, runId),
  ) {
    super('duplicate', message);
  }
}
