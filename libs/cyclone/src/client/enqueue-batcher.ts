import type { CycloneDatabase } from '../database/cyclone-database.js';
import { StatementBatcher } from '../database/statement-batcher.js';
import { ENQUEUE_AND_START, ENQUEUE_AND_START_WITHOUT_FLOORS, ENQUEUE_JOBS, type EnqueueStartRow } from '../sql/enqueue.sql.js';
import { SchemaFallback } from '../database/schema-fallback.js';
import type { ClaimedStep } from '../sql/claim.sql.js';
import { enqueueJobsValues, type NewJob } from '../steps/job-params.js';
import type { WakePublisher } from '../notifications/wake-publisher.js';
import type { LocalWorkers } from '../worker/local-workers.js';

/** More than this many enqueues wait for the next statement. */
const MAX_BATCH = 1000;

/** Who starts jobs here: the lease owner and TTL of this client's workers. */
export interface LocalLease {
  owner: string;
  leaseTtlMs: number;
}

/**
 * Inserts jobs with one statement per batch and wakes their queues once the
 * batch has committed. Concurrent enqueue calls of one client share a
 * statement (see StatementBatcher); each caller's promise settles with its
 * batch's commit, and a job the database refuses fails only its own caller.
 * A batch of one queue that an idle worker of this client serves is started
 * in it by the same statement (LocalWorkers).
 */
export class EnqueueBatcher {
  private readonly batcher: StatementBatcher<NewJob, void>;
  private readonly schema = new SchemaFallback();

  constructor(
    private readonly database: CycloneDatabase,
    private readonly wakes: WakePublisher,
    private readonly local: LocalWorkers,
    private readonly lease: LocalLease,
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
    const start = this.localStart(jobs);
    if (!start) {
      const { rows } = await this.database.query(ENQUEUE_JOBS, enqueueJobsValues(jobs));
      for (const { queue } of rows) this.wakes.wake(queue);
      return;
    }
    let rows: EnqueueStartRow[] = [];
    try {
      const params = [
        ...enqueueJobsValues(jobs),
        start.queue,
        start.kinds,
        start.limit,
        this.lease.owner,
        this.lease.leaseTtlMs,
      ] as const;
      rows = await this.schema.run(
        async () => (await this.database.query(ENQUEUE_AND_START, [...params, ...start.floors])).rows,
        async () => (await this.database.query(ENQUEUE_AND_START_WITHOUT_FLOORS, [...params])).rows,
      );
    } finally {
      // The slots go back before the wake-ups, which may claim with them.
      const floors = rows.find((row) => row.id === null && row.woken === null && row.next_bands);
      start.started(
        rows.filter((row): row is ClaimedStep & EnqueueStartRow => row.id !== null),
        floors && [floors.next_bands!, floors.next_floors!],
      );
    }
    for (const { woken } of rows) if (woken !== null) this.wakes.wake(woken);
  }

  /** Slots of an idle local worker for the batch's due jobs, when they are all of one queue. */
  private localStart(jobs: NewJob[]) {
    const due = jobs.filter((j) => j.params.processAt === null && j.params.processInMs <= 0);
    if (due.length === 0) return undefined;
    const queue = due[0].params.queue;
    if (jobs.some((j) => j.params.queue !== queue)) return undefined;
    return this.local.reserve(queue, [...new Set(due.map((j) => j.params.kind))], due.length);
  }
}
