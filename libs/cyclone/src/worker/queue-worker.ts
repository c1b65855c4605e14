import { Logger } from '@nestjs/common';
import type { StepRegistry } from '../steps/step-registry.js';
import { FlowSource, PlainSource, WorkflowSource, type ClaimSource } from './claim-source.js';
import type { RegisteredStep } from '../steps/registered-step.js';
import type { RegisteredWorkflow } from '../workflow/code/registered-workflow.js';
import type { ClaimedStep } from '../sql/claim.sql.js';
import { StepExecution, type ExecutionDeps } from './step-execution.js';
import { ClaimAhead, aheadTimes } from './claim-ahead.js';
import { handBack } from './hand-back.js';

/**
 * A step claimed ahead of a free slot, and when (performance.now()); with
 * the plain claim, also when its short lease ends unless it is renewed.
 */
interface ReadyStep {
  row: ClaimedStep;
  claimedAt: number;
  leaseEndsAt?: number;
}

/**
 * The workers of one queue: a number of slots, filled by one claim statement
 * for as many steps as there are free slots. Claims never overlap; a wake-up
 * that arrives during a claim makes it claim once more when it ends. A slot is
 * free again when its handler returns: recording the outcome (batched with
 * others) overlaps the next claim. The step stays in `running` until its
 * outcome is recorded, so shutdown waits for the write.
 *
 * Under a backlog of short steps a claim also takes steps ahead of the free
 * slots (see ClaimAhead): started the moment a slot frees, and refilled once
 * half of them have started. The plain claim leases such a claim's steps
 * for at most 3 s (aheadTimes), so that a worker that dies with steps at
 * hand does not hold them for a whole lease TTL; a step still running
 * halfway to that end renews its lease. Steps at hand go back, available at
 * once to any client, when another client's claim came back short while
 * they waited (lendAhead, on a cyclone_idle NOTIFY), when they have waited a
 * third of their short lease (never started after that: their lease could
 * end before the first renewal), and at shutdown: no step waits in a busy
 * worker while another one has room.
 *
 * A queue claims from one source, or several when some of its kinds have
 * limits or the queue has a cap (see ClaimSource); each claim starts from
 * the next source in turn, so none has the free slots first every time. When
 * a limit held due work back, the worker claims again as soon as one of its
 * own steps has finished (its outcome recorded, so its room is free);
 * another client's finished steps are seen at the next poll tick. No step is
 * claimed ahead while a limit holds work back (it would hold room another
 * client could start at once), nor one of a kind with a rate limit (see
 * ClaimSource.claimsAhead).
 *
 * The code workflows on the queue are claimed from a source of their own
 * (WorkflowSource), and each of their passes runs as a step would: a
 * workflow's node is a step whose handler runs its method.
 *
 * With broker dispatch on, the plain source is not claimed from: its steps
 * come from the queue's streams (StreamConsumer), started by id in the free
 * slots, and the worker claims only from the sources that need the
 * database's view (limits, caps, workflow versions), woken by their messages
 * and the poll tick; while Redis is away (whenRedisDown 'claim') the plain
 * source is claimed from again.
 */
export class QueueWorker {
  private readonly logger = new Logger('Cyclone');
  readonly running = new Map<string, StepExecution>();
  /** Slots whose handler has not returned yet. */
  private busy = 0;
  private claiming?: Promise<void>;
  private wakeAgain = false;
  /** The last claim filled every free slot: there may be more waiting. */
  private backlog = false;
  /** A wake-up came while no slot was free: claim once one frees, not at the next poll tick. */
  private missedWake = false;
  /** Slots enqueues have taken for their jobs (reserve), counted up: a claim sees what was taken while it was out. */
  private reservations = 0;
  /** The last claim left due work because a limit had no room. */
  private heldBack = false;
  private stopped = false;
  private wakeScheduled = false;
  private readonly sources: ClaimSource[] = [];
  private nextSource = 0;
  private readonly ahead = new ClaimAhead();
  /** How long a step claimed ahead may wait at hand (aheadTimes). */
  private readonly readyMaxMs: number;
  /** Claimed ahead, oldest first. */
  private readonly ready: ReadyStep[] = [];
  private readyTimer?: NodeJS.Timeout;
  /** The workflows' nodes, as steps, by name. */
  private readonly workflowSteps = new Map<string, RegisteredStep>();
  /** The plain claim's source, if the queue has one (with broker dispatch, claimed from only while Redis is away). */
  private readonly plainSource?: PlainSource;
  /**
   * The kinds of the plain claim (none on a capped queue): the ones an
   * enqueue here may start in this worker (LocalWorkers) and, with broker
   * dispatch on, the ones dispatch messages start by id (StreamConsumer).
   */
  readonly plainKinds: readonly string[] = [];
  /** Told when a step's attempt is over (its outcome written, or not: 'unrecorded') or when it was handed back. */
  onSettled?: (stepId: string, outcome: string) => void;
  private slotWaiters: (() => void)[] = [];
  /** Slots held for enqueues on their way (LocalWorkers). */
  private reserved = 0;

  constructor(
    readonly queue: string,
    readonly slots: number,
    private readonly registry: StepRegistry,
    private readonly deps: ExecutionDeps,
    queueCap: number | null = null,
    workflows: RegisteredWorkflow[] = [],
    private readonly dispatched = false,
  ) {
    const ctx = { database: deps.database, queue, owner: deps.owner, leaseTtlMs: deps.leaseTtlMs, queueCap };
    this.readyMaxMs = aheadTimes(deps.leaseTtlMs).maxWaitMs;
    const steps = registry.all();
    const unlimited = steps.filter((s) => !s.flow).map((s) => s.kind);
    if (unlimited.length > 0 || (steps.length === 0 && workflows.length === 0)) {
      if (queueCap !== null) {
        this.sources.push(new FlowSource(ctx, unlimited, undefined));
      } else {
        this.plainKinds = unlimited;
        this.plainSource = new PlainSource(ctx, unlimited);
        if (!dispatched) this.sources.push(this.plainSource);
      }
    }
    for (const step of steps) if (step.flow) this.sources.push(new FlowSource(ctx, [step.kind], step.flow));
    if (workflows.length > 0) this.sources.push(new WorkflowSource(ctx, workflows));
    for (const workflow of workflows) this.workflowSteps.set(workflow.name, workflow.step);
  }

  wake(): void {
    if (this.stopped || this.slots === 0) return;
    if (this.claiming) {
      this.wakeAgain = true;
      return;
    }
    this.claiming = this.claimWhileWork().finally(() => {
      this.claiming = undefined;
      // A wake-up that arrived after the last loop check must not be lost.
      if (this.wakeAgain) this.wake();
    });
  }

  /**
   * The poll tick: looks below the plain claim's floors (at most once a
   * second; a step found there, which a claim from the floors would not
   * read, moves its floor down), then claims.
   */
  async poll(): Promise<void> {
    try {
      if (!this.stopped) await this.claimedPlain()?.checkFloors();
    } catch (err) {
      // The claim below reports a database that is away; this look is tried again next tick.
      if (!this.deps.database.covers(err)) {
        this.logger.warn(`Look below the claim floors of queue "${this.queue}" failed: ${(err as Error).message}`);
      }
    }
    this.wake();
  }

  /** The plain claim's source, if this worker claims from it (with broker dispatch, only while Redis is away). */
  private claimedPlain(): PlainSource | undefined {
    return this.plainSource && this.sources.includes(this.plainSource) ? this.plainSource : undefined;
  }

  /** Where an enqueue that starts its jobs here reads the queue from: the plain claim's floors. */
  floorParams(): [bands: number[], floors: Date[]] {
    return this.plainSource?.floors.params() ?? [[], []];
  }

  /**
   * Wakes on the next turn of the event loop, so that slots freed together
   * (a batch of completions) are claimed for in one statement, not one each.
   */
  private wakeSoon(): void {
    if (this.wakeScheduled) return;
    this.wakeScheduled = true;
    setImmediate(() => {
      this.wakeScheduled = false;
      this.wake();
    });
  }

  /**
   * Stops claiming, waits for a claim in flight, and hands back the steps
   * claimed ahead: every step this worker still holds is then running.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.freeSlot();
    await this.claiming;
    clearTimeout(this.readyTimer);
    await this.handBackReady(this.ready.splice(0), 'at shutdown');
  }

  /** Whether this worker runs steps of `kind`, or the code workflow of that name. */
  runsKind(kind: string): boolean {
    return this.workflowSteps.has(kind) || this.registry.find(kind) !== undefined;
  }

  /** Slots with neither a handler running, nor a step at hand to start, nor an enqueue's job on its way. */
  freeSlots(): number {
    return this.stopped ? 0 : this.slots - this.busy - this.ready.length - this.reserved;
  }

  /**
   * Holds up to `jobs` free slots for an enqueue's jobs; none while the
   * worker has a backlog (its claims take the queue in order) or a limit
   * holds work back.
   */
  reserve(jobs: number): number {
    if (this.backlog || this.heldBack) return 0;
    const n = Math.max(0, Math.min(jobs, this.freeSlots()));
    this.reserved += n;
    this.reservations += n;
    return n;
  }

  /** The enqueue holding `held` slots returned: starts the steps it started here and frees the rest; takes the floors it moved on. */
  startReserved(held: number, rows: ClaimedStep[], floors?: [bands: number[], floors: Date[]]): void {
    this.reserved -= held;
    if (floors) this.claimedPlain()?.floors.claimed(...floors);
    if (this.stopped) {
      void this.handBackReady(rows.map((row) => ({ row, claimedAt: performance.now() })), 'at shutdown');
      return;
    }
    this.start(rows);
    if (rows.length < held) this.freeSlot();
  }

  /**
   * Another client's claim of this queue came back short while it had room:
   * hands back every step at hand (none is at hand while this worker has a
   * free slot), so that the other client takes them now.
   */
  lendAhead(): void {
    if (this.ready.length === 0 || this.stopped) return;
    clearTimeout(this.readyTimer);
    this.readyTimer = undefined;
    // The queue ran dry for the other client: none of these is claimed ahead again.
    this.backlog = false;
    void this.handBackReady(this.ready.splice(0), 'for an idle worker elsewhere');
  }

  /** Settles when a slot may have freed (a handler returned), or at stop. */
  slotFreed(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => this.slotWaiters.push(resolve));
  }

  /** Starts steps that dispatch messages named (already leased to this client). */
  startDispatched(rows: ClaimedStep[]): void {
    this.start(rows);
  }

  /**
   * How many messages to read beyond the free slots, under a backlog of
   * short steps (see ClaimAhead): a read and its start statement take the
   * place of a claim, and cost as much for one step as for many.
   */
  dispatchAhead(): number {
    return this.ahead.size(this.slots);
  }

  /** A read of messages that found a backlog, and the start of their steps, took this long. */
  dispatchTook(ms: number): void {
    this.ahead.claimed(ms);
  }

  /** While Redis is away (whenRedisDown 'claim'): claim the plain source's steps from the database again. */
  setClaimFallback(on: boolean): void {
    if (!this.plainSource || !this.dispatched) return;
    const index = this.sources.indexOf(this.plainSource);
    if (on && index < 0) this.sources.unshift(this.plainSource);
    if (!on && index >= 0) this.sources.splice(index, 1);
    // Floors are kept up only while the source is claimed from.
    if (!on) this.plainSource.floors.forget();
    if (on) this.wake();
  }

  private freeSlot(): void {
    const waiters = this.slotWaiters;
    this.slotWaiters = [];
    for (const resolve of waiters) resolve();
  }

  /** How many steps to claim now from a source: 0 while the slots and the steps at hand suffice. */
  private wanted(source: ClaimSource): number {
    const idle = this.slots - this.busy - this.ready.length - this.reserved;
    const ahead = source.claimsAhead && this.backlog && !this.heldBack ? this.ahead.size(this.slots) : 0;
    if (idle <= 0 && this.ready.length > ahead / 2) return 0;
    return Math.max(0, this.slots + ahead - this.busy - this.ready.length - this.reserved);
  }

  /**
   * One claim pass: claims while there is room and the last claim filled it.
   * Reported to the engine's observers once over, if it sent a statement.
   */
  private async claimWhileWork(): Promise<void> {
    const startedAt = performance.now();
    let claims = 0;
    try {
      do {
        this.wakeAgain = false;
        if (this.sources.length === 0) break;
        this.missedWake = this.sources.every((s) => this.wanted(s) <= 0);
        if (this.missedWake) break;
        let filled = false;
        let heldBack = false;
        const first = this.nextSource;
        this.nextSource = (first + 1) % this.sources.length;
        for (let i = 0; i < this.sources.length && !this.stopped; i++) {
          const source = this.sources[(first + i) % this.sources.length];
          const wanted = this.wanted(source);
          if (wanted <= 0) {
            filled = true;
            break;
          }
          const began = performance.now();
          claims += 1;
          const reservedBefore = this.reservations;
          const claim = await source.claim(wanted, Math.max(0, this.freeSlots()));
          if (claim.rows.length > 0) this.ahead.claimed(performance.now() - began);
          // An enqueue may have started its jobs in the slots this claim was
          // for (reserve): what no longer fits goes back at once, to be taken
          // where there is room, not held at hand here.
          const excess = claim.rows.splice(Math.max(0, wanted - (this.reservations - reservedBefore)));
          if (excess.length > 0) {
            this.missedWake = true;
            void this.handBackReady(
              excess.map((row) => ({ row, claimedAt: began })),
              'whose slots an enqueue took meanwhile',
            );
          }
          this.start(claim.rows, claim.shortLeaseMs === undefined ? undefined : began + claim.shortLeaseMs);
          filled ||= claim.rows.length === wanted;
          heldBack ||= claim.heldBack;
        }
        this.backlog = filled;
        this.heldBack = heldBack;
      } while ((this.wakeAgain || this.backlog) && !this.stopped);
    } catch (err) {
      // Usually the database is unreachable. Claiming pauses until the next
      // poll tick or wake-up; nothing was claimed, so nothing is lost.
      this.deps.stats.claimFailures += 1;
      this.deps.stats.lastClaimError = (err as Error).message;
      if (!this.deps.database.covers(err)) this.logger.warn(`Claim on queue "${this.queue}" failed: ${(err as Error).message}`);
      this.deps.stats.events.passEnded({ loop: 'cyclone:claim', queue: this.queue, startedAt, error: (err as Error).message });
      return;
    }
    if (claims > 0) this.deps.stats.events.passEnded({ loop: 'cyclone:claim', queue: this.queue, startedAt });
  }

  /** Starts claimed steps in free slots; the rest wait for one. `leaseEndsAt`: when their short lease ends, if they hold one. */
  private start(rows: ClaimedStep[], leaseEndsAt?: number): void {
    const now = performance.now();
    for (const row of rows) this.ready.push({ row, claimedAt: now, leaseEndsAt });
    while (this.busy < this.slots && this.ready.length > 0 && !this.stopped) this.startReady();
    this.scheduleHandBack();
  }

  /**
   * Starts the oldest step at hand. One that has waited past readyMaxMs (an
   * event loop held up for longer than the hand-back timer allowed) is
   * handed back, not started: its short lease may not outlast its start.
   */
  private startReady(): void {
    const stale = this.takeStale();
    if (stale.length > 0) void this.handBackReady(stale, `after waiting ${this.readyMaxMs} ms for a slot`);
    if (this.ready.length === 0) return;
    const { row, claimedAt, leaseEndsAt } = this.ready.shift()!;
    const began = performance.now();
    // The wait since due includes the time it waited here.
    row.wait_ms += began - claimedAt;
    const execution = new StepExecution(row, this.workflowSteps.get(row.kind) ?? this.registry.get(row.kind), this.deps, leaseEndsAt);
    this.running.set(row.id, execution);
    this.busy += 1;
    void execution.handlerDone.then(() => {
      this.busy -= 1;
      this.ahead.handled(performance.now() - began);
      if (this.ready.length > 0 && !this.stopped) this.startReady();
      if (this.backlog || this.missedWake) this.wakeSoon();
      this.freeSlot();
    });
    void execution.start().finally(() => {
      this.running.delete(row.id);
      this.onSettled?.(row.id, execution.outcome ?? 'unrecorded');
      // Its outcome is recorded: the room it held under a limit is free.
      if (this.heldBack) this.wakeSoon();
    });
  }

  /** Hands back, when the oldest has waited readyMaxMs, the steps at hand that have. */
  private scheduleHandBack(): void {
    if (this.readyTimer !== undefined || this.ready.length === 0 || this.stopped) return;
    const delay = this.ready[0].claimedAt + this.readyMaxMs - performance.now();
    this.readyTimer = setTimeout(() => {
      this.readyTimer = undefined;
      const stale = this.takeStale();
      if (stale.length > 0) this.ahead.stalled(this.readyMaxMs);
      void this.handBackReady(stale, `after waiting ${this.readyMaxMs} ms for a slot`).finally(() => this.scheduleHandBack());
    }, Math.max(0, delay));
  }

  /** Takes the steps at hand that have waited readyMaxMs (the oldest come first). */
  private takeStale(): ReadyStep[] {
    const cutoff = performance.now() - this.readyMaxMs;
    let stale = 0;
    while (stale < this.ready.length && this.ready[stale].claimedAt <= cutoff) stale += 1;
    return this.ready.splice(0, stale);
  }

  private async handBackReady(steps: ReadyStep[], when: string): Promise<void> {
    if (steps.length === 0) return;
    try {
      await handBack(this.deps.database, this.deps.owner, steps.map((s) => s.row));
      for (const { row } of steps) this.onSettled?.(row.id, 'handed_back');
      this.logger.debug(`Queue "${this.queue}": handed back ${steps.length} step(s) claimed ahead ${when}`);
    } catch (err) {
      // Still leased to this client: the recovery sweep makes them available
      // once their lease expires (counting a reclaim, not an attempt).
      this.logger.warn(
        `Queue "${this.queue}": could not hand back ${steps.length} step(s) claimed ahead ${when} ` +
          `(${(err as Error).message}); they become available when their lease expires`,
      );
    }
  }
}
