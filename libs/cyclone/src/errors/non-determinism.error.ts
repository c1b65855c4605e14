import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/**
 * A replay of a code workflow met a recorded node as something else: the
 * method called a name the run recorded as another kind of call (or another
 * step kind, or another child). The run fails; the message names the node.
 */
export class NonDeterminismError extends CycloneError {
  constructor(
    readonly workflow: string,
    readonly runId: string,
    readonly nodeId: string,
    recorded: string,
    called: string,
  ) {
    super('non_determinism', messages.nonDeterminism(workflow, runId, nodeId, recorded, called));
  }
}
