import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/**
 * The key function of a step's `concurrency` or `rateLimit` threw, or gave
 * something other than a string, for the input of an enqueue. That enqueue
 * fails and writes nothing; others go on.
 */
export class InvalidKeyError extends CycloneError {
  constructor(
    readonly kind: string,
    /** `concurrency.key` or `rateLimit.key`. */
    readonly option: string,
    problem: string,
    options?: { cause?: unknown },
  ) {
    super('invalid_key', messages.invalidKey(kind, option, problem), options);
  }
}
