import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** pauseQueue or resumeQueue named a queue no client serves, no step names and no run is on. */
export class QueueNotFoundError extends CycloneError {
  constructor(readonly queue: string) {
    super('queue_not_found', messages.queueNotFound(queue));
  }
}
