import { CycloneError } from './cyclone.error.js';

/** An option, duration or argument that cannot be used as given. */
export class InvalidOptionError extends CycloneError {
  constructor(message: string, cause?: unknown) {
    super('invalid_option', message, cause === undefined ? undefined : { cause });
  }
}
