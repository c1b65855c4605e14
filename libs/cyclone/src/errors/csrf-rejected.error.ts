import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** A dashboard action that did not prove it came from the dashboard's own page. */
export class CsrfRejectedError extends CycloneError {
  constructor(reason: string) {
    super('csrf_rejected', messages.csrfRejected(reason));
  }
}
