import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** A feature needs an optional peer dependency that is not installed. */
export class MissingDependencyError extends CycloneError {
  constructor(
    readonly packageName: string,
    feature: string,
    cause?: unknown,
  ) {
    super('missing_dependency', messages.missingDependency(packageName, feature), { cause });
  }
}
