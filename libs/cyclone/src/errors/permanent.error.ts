import { CycloneError } from './cyclone.error.js';
import { describeValue } from '../cyclone.messages.js';

/**
 * Thrown by a handler to say that retrying cannot help: the attempt is the
 * last one and the step is discarded with `error_kind = 'permanent'`.
 */
export class PermanentError extends CycloneError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('permanent', message, options);
  }
}

/** Wraps any thrown value so the engine treats it as permanent. */
export function permanent(err: unknown): PermanentError {
  if (err instanceof PermanentError) return err;
  let message: string;
  try {
    message = err instanceof Error ? String(err.message) : typeof err === 'string' ? err : describeValue(err);
  } catch {
    message = 'an error whose message cannot be read';
  }
  return new PermanentError(message, { cause: err });
}
