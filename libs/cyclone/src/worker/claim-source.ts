import type { CycloneDatabase } from '../database/cyclone-database.js';
import { CLAIM_FLOORS, CLAIM_FLOW, CLAIM_STEPS, CLAIM_STEPS_WITHOUT_FLOORS, type ClaimedStep } from '../sql/claim.sql.js';
import { SchemaFallback } from '../database/schema-fallback.js';
import { CLAIM_WORKFLOWS } from '../sql/code-workflow.sql.js';
import type { RegisteredWorkflow } from '../workflow/code/registered-workflow.js';
import { isKeyed, type FlowLimits } from '../steps/flow-limits.js';
import { aheadTimes } from './claim-ahead.js';
import { ClaimFloors } from './claim-floors.js';

/** What one claim of a source gave: the started steps, and whether a limit held due work back. */
export interface SourceClaim {
  rows: ClaimedStep[];
  heldBack: boolean;
  /** With steps claimed ahead: the short lease every row holds (aheadTimes), unless renewed. */
  shortLeaseMs?: number;
}

/**
 * Where a queue's workers claim from. A queue without a cap claims its kinds
 * without limits with the plain claim statement, as if flow control did not
 * exist; each limited kind, and the unlimited kinds of a capped queue, claim
 * through cyclone_claim_flow (sql/functions/claim-flow.sql), which enforces
 * the limits cluster-wide.
 */
export interface ClaimSource {
  /**
   * Whether its steps may be claimed ahead of a free slot. Not under a rate
   * limit: a claim counts its starts when it is made, and a step claimed
   * ahead starts later, so a window of actual starts could hold more than the
   * limit. (A concurrency limit counts what is leased, so it holds.)
   */
  readonly claimsAhead: boolean;
  /** Claims up to `limit` steps, of which the first `free` start at once (the rest are claimed ahead). */
  claim(limit: number, free: number): Promise<SourceClaim>;
}

export interface ClaimContext {
  database: CycloneDatabase;
  queue: string;
  owner: string;
  leaseTtlMs: number;
  /** The queue's cluster-wide cap, if it has one. */
  queueCap: number | null;
}

/**
 * The kinds without limits of a queue without a cap: the plain claim. A
 * claim that takes steps ahead of the free slots leases all of its steps
 * briefly (aheadTimes): under a backlog of short steps they are done long
 * before that lease ends, and a worker that dies holding them leaves them to
 * the recovery sweep within seconds, not after a whole lease TTL. A claim
 * that comes back short asks other clients for the steps they hold ahead
 * (claim-steps.sql). Each claim reads the queue's bands from the floors the
 * last one returned (ClaimFloors).
 */
export class PlainSource implements ClaimSource {
  readonly claimsAhead = true;
  readonly floors = new ClaimFloors();
  private readonly schema = new SchemaFallback();
  private readonly aheadLeaseMs: number;

  constructor(
    private readonly ctx: ClaimContext,
    private readonly kinds: string[],
  ) {
    this.aheadLeaseMs = aheadTimes(ctx.leaseTtlMs).leaseMs;
  }

  async claim(limit: number, free: number): Promise<SourceClaim> {
    const { database, queue, owner, leaseTtlMs } = this.ctx;
    const shortLeaseMs = limit > free ? this.aheadLeaseMs : undefined;
    const params = [queue, this.kinds, limit, owner, shortLeaseMs ?? leaseTtlMs] as const;
    const rows = await this.schema.run(
      async () => {
        const { rows } = await database.query(CLAIM_STEPS, [...params, ...this.floors.params()]);
        const status = rows[rows.length - 1];
        if (status.asked_back) this.floors.forget();
        else this.floors.claimed(status.next_bands ?? [], status.next_floors ?? []);
        return rows.slice(0, -1) as ClaimedStep[];
      },
      async () => (await database.query(CLAIM_STEPS_WITHOUT_FLOORS, [...params])).rows,
    );
    return { rows, heldBack: false, shortLeaseMs };
  }

  /** Looks below the floors, at most once a second (ClaimFloors.checkDue), and lowers each to the step found under it. */
  async checkFloors(): Promise<void> {
    const startedAt = performance.now();
    if (!this.floors.checkDue(startedAt)) return;
    const [bands, floors] = this.floors.params();
    try {
      const { rows } = await this.ctx.database.query(CLAIM_FLOORS, [this.ctx.queue, this.kinds, bands, floors]);
      this.floors.lowered(
        rows.map((r) => r.band),
        rows.map((r) => r.floor),
      );
    } finally {
      this.floors.checked(startedAt, performance.now());
    }
  }
}

/**
 * One limited kind, or (limits undefined) the kinds without limits of a
 * capped queue. Keeps the kind's round-robin cursor: the last key it served.
 */
export class FlowSource implements ClaimSource {
  private cursor: string | null = null;
  readonly claimsAhead: boolean;

  constructor(
    private readonly ctx: ClaimContext,
    private readonly kinds: string[],
    private readonly limits: FlowLimits | undefined,
  ) {
    this.claimsAhead = limits?.rateLimit == null;
  }

  async claim(limit: number): Promise<SourceClaim> {
    const { database, queue, owner, leaseTtlMs, queueCap } = this.ctx;
    const l = this.limits;
    const { rows } = await database.query(CLAIM_FLOW, [
      queue,
      this.kinds,
      l !== undefined,
      l !== undefined && isKeyed(l),
      limit,
      owner,
      leaseTtlMs,
      queueCap,
      l?.kindCap ?? null,
      l?.keyCap ?? null,
      l?.rateLimit ?? null,
      l?.ratePerMs ?? null,
      l?.rateKey !== undefined,
      this.cursor,
    ]);
    const status = rows[rows.length - 1];
    this.cursor = status.next_cursor;
    return { rows: rows.slice(0, -1) as ClaimedStep[], heldBack: status.held_back === true };
  }
}

/**
 * The nodes of the code workflows on the queue (their methods' passes), each
 * up to this client's version of it (sql/functions/claim-workflows.sql).
 */
export class WorkflowSource implements ClaimSource {
  readonly claimsAhead = true;
  private readonly names: string[];
  private readonly versions: number[];

  constructor(
    private readonly ctx: ClaimContext,
    workflows: RegisteredWorkflow[],
  ) {
    this.names = workflows.map((w) => w.name);
    this.versions = workflows.map((w) => w.version);
  }

  async claim(limit: number): Promise<SourceClaim> {
    const { database, queue, owner, leaseTtlMs } = this.ctx;
    const { rows } = await database.query(CLAIM_WORKFLOWS, [queue, this.names, this.versions, limit, owner, leaseTtlMs]);
    return { rows, heldBack: false };
  }
}
