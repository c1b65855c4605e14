import { Logger } from '@nestjs/common';
import type { LoopName } from '../common/loop.js';
import type { ErrorKind, StepAttemptOutcome } from '../sql/names.js';

/** Jobs this client inserted, once their insert returned (for `enqueueTx`, before the caller's commit). */
export interface JobsEnqueued {
  queue: string;
  kind: string;
  count: number;
}

export interface WorkflowStarted {
  queue: string;
  workflow: string;
}

/** A step this client's workers claimed. */
export interface StepStarted {
  queue: string;
  kind: string;
  /**
   * From when it was due (`scheduled_at`) to its claim, on the database
   * clock, plus any time it waited claimed ahead for a slot.
   */
  waitMs: number;
}

/** A handler of this client's that returned, threw, or was given up on. */
export interface HandlerRan {
  queue: string;
  kind: string;
  durationMs: number;
}

/**
 * What became of an attempt: its step completed, was retried after a failure
 * or discarded, snoozed, cancelled under it, or reclaimed from a worker that
 * stopped heartbeating; or, for a code workflow's pass, suspended (the
 * workflow waits for its nodes, holding no worker). A timeout is told as
 * what followed it (retried or discarded) with `errorKind` 'timeout'.
 */
export type AttemptOutcome = Exclude<StepAttemptOutcome, 'timed_out'>;

/**
 * An attempt whose outcome this client committed (or, for `cancelled`,
 * learned): its worker's, or its recovery sweep's.
 */
export interface StepFinished {
  runId: string;
  nodeId: string;
  kind: string;
  queue: string;
  attempt: number;
  outcome: AttemptOutcome;
  /** The attempt ended in an error or a timeout (then `retried` or `discarded` says what followed). */
  failed: boolean;
  /** The stored output, as JSON text, of a completed step. */
  outputJson?: string;
  error?: string;
  errorKind?: ErrorKind;
}

/**
 * How an attempt of this client's ended: an outcome of StepFinished, or
 * `lease_lost` (its outcome was dropped: the step had moved on),
 * `handed_back` (at shutdown) or `unrecorded` (the write failed; the lease
 * will expire and the step be reclaimed).
 */
export type AttemptEnding = AttemptOutcome | 'lease_lost' | 'handed_back' | 'unrecorded';

/**
 * An attempt this client's worker ran is over: its outcome was written, or
 * dropped, or could not be written. Unlike StepFinished it comes for every
 * attempt, whatever became of it.
 */
export interface AttemptEnded {
  runId: string;
  nodeId: string;
  kind: string;
  queue: string;
  attempt: number;
  /** The attempt's lease generation, `ctx.fencingToken`: it tells two holders of one attempt apart. */
  fencingToken: number;
  outcome: AttemptEnding;
}

/**
 * A pass of one of this client's loops is over: a claim on a queue (one or
 * more claim statements, while there was room and work), or a tick of a
 * maintenance loop. A claim pass is reported only when it sent a statement:
 * one that found every slot busy looked for nothing.
 */
export interface PassEnded {
  loop: LoopName;
  /** The queue of a claim pass. */
  queue?: string;
  /** When the pass began, on this process's monotonic clock (`performance.now()`). */
  startedAt: number;
  /** Why the pass failed, when it did (usually the database could not be reached). */
  error?: string;
}

/** Something that wants to know what the engine does: metrics, `@OnStepEvent` listeners, the test kit. */
export interface EngineObserver {
  jobsEnqueued?(event: JobsEnqueued): void;
  workflowStarted?(event: WorkflowStarted): void;
  stepStarted?(event: StepStarted): void;
  handlerRan?(event: HandlerRan): void;
  stepFinished?(event: StepFinished): void;
  attemptEnded?(event: AttemptEnded): void;
  passEnded?(event: PassEnded): void;
}

/**
 * The in-process feed of what this client's engine did, for observers that
 * count it (metrics) or act on it (step event listeners). Called on the hot
 * paths, so it costs a loop over the observers and nothing more; an
 * observer's failure is logged and never reaches the step it reports on.
 */
export class EngineEvents {
  private readonly logger = new Logger('Cyclone');
  private observers: EngineObserver[] = [];

  /** Adds an observer; returns the function that removes it. */
  observe(observer: EngineObserver): () => void {
    this.observers = [...this.observers, observer];
    return () => {
      this.observers = this.observers.filter((o) => o !== observer);
    };
  }

  /** Whether anyone listens: an event that costs a query to describe is described only then. */
  get observed(): boolean {
    return this.observers.length > 0;
  }

  jobsEnqueued(event: JobsEnqueued): void {
    this.tell('jobsEnqueued', event);
  }

  workflowStarted(event: WorkflowStarted): void {
    this.tell('workflowStarted', event);
  }

  stepStarted(event: StepStarted): void {
    this.tell('stepStarted', event);
  }

  handlerRan(event: HandlerRan): void {
    this.tell('handlerRan', event);
  }

  stepFinished(event: StepFinished): void {
    this.tell('stepFinished', event);
  }

  attemptEnded(event: AttemptEnded): void {
    this.tell('attemptEnded', event);
  }

  passEnded(event: PassEnded): void {
    this.tell('passEnded', event);
  }

  private tell<K extends keyof EngineObserver>(what: K, event: Parameters<NonNullable<EngineObserver[K]>>[0]): void {
    for (const observer of this.observers) {
      try {
        (observer[what] as ((e: typeof event) => void) | undefined)?.call(observer, event);
      } catch (err) {
        this.logger.error(`An observer of Cyclone's events failed on ${what}: ${(err as Error)?.message ?? String(err)}`);
      }
    }
  }
}
