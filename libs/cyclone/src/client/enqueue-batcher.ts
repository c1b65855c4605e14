import type { CycloneDatabase } from '../database/cyclone-database.js';
import { StatementBatcher } from '../database/statement-batcher.js';
import { ENQUEUE_JOBS } from '../sql/enqueue.sql.js';
import { enqueueJobsValues, type NewJob } from '../steps/job-params.js';
import type { WakePublisher } from '../notifications/wake-publisher.js';

/** More than this many enqueues wait for the next statement. */
const MAX_BATCH = 1000;

/**
 * Inserts jobs with one statement per batch and wakes their queues once the
 * batch has committed. Concurrent enqueue calls of one client share a
 * statement (see StatementBatcher); each caller's promise settles with its
 * batch's commit, and a job the database refuses fails only its own caller.
 */
export class EnqueueBatcher {
  private readonly batcher: StatementBatcher<NewJob, void>;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly wakes: WakePublisher,
  ) {
    this.batcher = new StatementBatcher<NewJob, void>(async (jobs) => {
      await this.insert(jobs);
      return jobs.map(() => undefined);
    }, MAX_BATCH);
  }

  enqueue(job: NewJob): Promise<void> {
    return this.batcher.add(job);
  }

  /** Inserts jobs in one statement and wakes the queues that have one due now. */
  async insert(jobs: NewJob[]): Promise<void> {
    const { rows } = await this.database.query(ENQUEUE_JOBS, enqueueJobsValues(jobs));
    for (const { queue } of rows) this.wakes.wake(queue);
  }
}
