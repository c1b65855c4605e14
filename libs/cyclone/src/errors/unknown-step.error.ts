import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** A kind that no `@Step` handler registered. */
export class UnknownStepError extends CycloneError {
  constructor(readonly kind: string) {
    super('unknown_step', messages.unknownStep(kind));
  }
}
