import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** A code workflow's run would record more nodes than its `maxNodes` allows; the run fails. */
export class NodeLimitError extends CycloneError {
  constructor(
    readonly workflow: string,
    readonly runId: string,
    readonly maxNodes: number,
  ) {
    super('node_limit', messages.nodeLimit(workflow, runId, maxNodes));
  }
}
