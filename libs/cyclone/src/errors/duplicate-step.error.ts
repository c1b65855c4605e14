import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** Two handlers registered for the same kind. */
export class DuplicateStepError extends CycloneError {
  constructor(
    readonly kind: string,
    first: string,
    second: string,
  ) {
    super('duplicate_step', messages.duplicateStep(kind, first, second));
  }
}
