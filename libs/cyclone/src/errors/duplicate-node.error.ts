import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** A code workflow made two durable calls of one name in one run: each call is a node named by its first argument. */
export class DuplicateNodeError extends CycloneError {
  constructor(
    readonly workflow: string,
    readonly runId: string,
    readonly nodeId: string,
  ) {
    super('duplicate_node', messages.duplicateNode(workflow, runId, nodeId));
  }
}
