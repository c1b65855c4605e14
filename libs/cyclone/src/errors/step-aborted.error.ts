import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

export type AbortReason = 'timeout' | 'cancelled' | 'lease_lost' | 'shutdown';

/** The reason of a handler's `ctx.signal` when the engine aborts it. */
export class StepAbortedError extends CycloneError {
  constructor(
    readonly reason: AbortReason,
    readonly runId: string,
    readonly nodeId: string,
  ) {
    super(`step_${reason}`, messages.stepAborted(reason, runId, nodeId));
  }
}
