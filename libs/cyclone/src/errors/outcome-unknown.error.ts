import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/**
 * The connection was lost while a write was committing: it may have taken
 * effect or not. `runIds` are the runs it wrote (an enqueue's new run, the
 * run a cancel or signal was for), so the caller can look them up before
 * repeating the call.
 */
export class OutcomeUnknownError extends CycloneError {
  constructor(
    readonly runIds: readonly string[],
    where: string,
    reason: string,
    cause?: unknown,
  ) {
    super('outcome_unknown', messages.outcomeUnknown(where, reason, runIds), { cause });
  }

  /** The run, when the call wrote exactly one. */
  get runId(): string | undefined {
    return this.runIds.length === 1 ? this.runIds[0] : undefined;
  }
}
