import { CycloneError } from './cyclone.error.js';

/** A request parameter of the dashboard's API that cannot be used as given; `parameter` names it. */
export class InvalidParameterError extends CycloneError {
  constructor(
    readonly parameter: string,
    message: string,
  ) {
    super('invalid_parameter', message);
  }
}
