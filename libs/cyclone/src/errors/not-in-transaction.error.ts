import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** `enqueueTx` was given a manager or query runner with no open transaction. */
export class NotInTransactionError extends CycloneError {
  constructor() {
    super('not_in_transaction', messages.notInTransaction());
  }
}
