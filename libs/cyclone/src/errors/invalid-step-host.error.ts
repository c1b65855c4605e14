import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** A `@Step` handler (or an `@OnStepEvent` listener) on a provider that is not a singleton. */
export class InvalidStepHostError extends CycloneError {
  constructor(host: string, kind: string, declaration = `@Step('${kind}')`) {
    super('invalid_step_host', messages.requestScopedHost(host, declaration));
  }
}
