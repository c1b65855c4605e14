import { Injectable } from '@nestjs/common';
import type { ClaimedStep } from '../sql/claim.sql.js';
import type { QueueWorker } from './queue-worker.js';

/** Slots of one idle worker held for an enqueue's jobs until its statement returns. */
export interface LocalStart {
  queue: string;
  kinds: string[];
  limit: number;
  /** Where the worker's claims read the queue's bands from (ClaimFloors). */
  floors: [bands: number[], floors: Date[]];
  /** Hands over the steps the statement started, and lets go of the slots it did not use; and the floors it moved on. */
  started(rows: ClaimedStep[], floors?: [bands: number[], floors: Date[]]): void;
}

/**
 * This client's workers, for its enqueues: an enqueue whose jobs an idle
 * worker here runs starts them in that worker in its own statement
 * (sql/functions/insert-and-start.sql), so no wake-up and no claim stand
 * between the enqueue's commit and the handler. Only for a batch of one
 * queue, of a worker with free slots and no backlog (a worker that is
 * catching up claims in order instead).
 */
@Injectable()
export class LocalWorkers {
  private readonly workers = new Map<string, QueueWorker>();

  register(worker: QueueWorker): void {
    this.workers.set(worker.queue, worker);
  }

  clear(): void {
    this.workers.clear();
  }

  /** Holds slots for up to `jobs` due jobs of `queue` and `kinds`, or undefined when no worker here can take them now. */
  reserve(queue: string, kinds: readonly string[], jobs: number): LocalStart | undefined {
    const worker = this.workers.get(queue);
    if (!worker || !kinds.every((kind) => worker.plainKinds.includes(kind))) return undefined;
    const limit = worker.reserve(jobs);
    if (limit === 0) return undefined;
    return {
      queue,
      kinds: [...kinds],
      limit,
      floors: worker.floorParams(),
      started: (rows, floors) => worker.startReserved(limit, rows, floors),
    };
  }
}
