import { CycloneError } from './cyclone.error.js';

/** The run or step is not in a state that allows the requested operation. */
export class InvalidStateError extends CycloneError {
  constructor(
    message: string,
    readonly state: string,
  ) {
    super('invalid_state', message);
  }
}
