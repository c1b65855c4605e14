import type { CycloneDatabase } from '../database/cyclone-database.js';
import { ENQUEUE_JOBS } from '../sql/enqueue.sql.js';
import { isRejectedData } from '../database/rejected-data.js';
import { enqueueJobsValues, type NewJob } from './job-params.js';
import type { WakePublisher } from './wake-publisher.js';

interface PendingEnqueue {
  job: NewJob;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** More than this many enqueues wait for the next statement. */
const MAX_BATCH = 1000;

/**
 * Inserts jobs with one statement per batch and wakes their queues once the
 * batch has committed. An enqueue made while no statement is on its way goes
 * out at once; enqueues made while one is on its way wait and go out together
 * when it returns, so concurrent callers share commits instead of queueing
 * for one each. Each caller's promise settles with its batch's commit.
 */
export class EnqueueBatcher {
  private waiting: PendingEnqueue[] = [];
  private inFlight = false;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly wakes: WakePublisher,
  ) {}

  enqueue(job: NewJob): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ job, resolve, reject });
      if (!this.inFlight) void this.flush();
    });
  }

  /** Inserts jobs in one statement and wakes the queues that have one due now. */
  async insert(jobs: NewJob[]): Promise<void> {
    const { rows } = await this.database.query<{ queue: string }>(ENQUEUE_JOBS, enqueueJobsValues(jobs), 'cyclone_enqueue_jobs');
    for (const { queue } of rows) this.wakes.wake(queue);
  }

  private async flush(): Promise<void> {
    this.inFlight = true;
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, MAX_BATCH);
      try {
        await this.insert(batch.map((e) => e.job));
        for (const e of batch) e.resolve();
      } catch (err) {
        if (batch.length > 1 && isRejectedData(err)) {
          // The statement wrote nothing; find whose job it was by trying each alone.
          await Promise.all(batch.map((e) => this.insert([e.job]).then(e.resolve, e.reject)));
        } else {
          for (const e of batch) e.reject(err);
        }
      }
    }
    this.inFlight = false;
  }
}
