import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/**
 * A dashboard action on many runs found more runs to act on than the
 * operator confirmed: it did nothing, and says how many match now.
 */
export class BulkCountChangedError extends CycloneError {
  constructor(
    readonly confirmed: number,
    readonly found: number,
  ) {
    super('count_changed', messages.bulkCountChanged(confirmed, found));
  }
}
