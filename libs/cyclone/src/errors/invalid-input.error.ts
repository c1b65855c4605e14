import { CycloneError } from './cyclone.error.js';

/** A step input that is not JSON-serialisable or is over the size limit. */
export class InvalidInputError extends CycloneError {
  constructor(message: string, cause?: unknown) {
    super('invalid_input', message, { cause });
  }
}
