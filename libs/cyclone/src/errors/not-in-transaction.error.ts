import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** `enqueueTx` was given a manager or query runner with no open transaction, or one that has failed. */
export class NotInTransactionError extends CycloneError {
  constructor(message = messages.notInTransaction()) {
    super('not_in_transaction', message);
  }
}
