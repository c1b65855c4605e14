import { CycloneError } from './cyclone.error.js';

/** The test kit gave up waiting for the engine: a loop's passes, or an attempt's end. */
export class WaitTimeoutError extends CycloneError {
  constructor(message: string) {
    super('wait_timeout', message);
  }
}
