import type { Logger } from '@nestjs/common';
import type { Duration } from '../common/duration.js';
import type { Snooze } from './snooze.js';

/** What a step handler learns about the attempt it runs. */
export interface StepContext<RunInput = unknown> {
  readonly runId: string;
  readonly nodeId: string;
  readonly kind: string;
  /** The attempt now running, from 1. A reclaim after a crash runs the same attempt again. */
  readonly attempt: number;
  /** How many times this step was reclaimed from a worker that stopped heartbeating. */
  readonly reclaims: number;
  /** Aborts on timeout, cancellation, lease loss or shutdown; its `reason` is a `StepAbortedError`. */
  readonly signal: AbortSignal;
  /** The worker's own deadline for this attempt, or null without a timeout. */
  readonly deadline: Date | null;
  readonly logger: Logger;
  /**
   * The lease generation of this attempt. It grows with every claim, so an
   * external system that keeps the highest token it has seen can refuse writes
   * from a worker that has since lost the step.
   */
  readonly fencingToken: number;
  /** The run's input. */
  readonly input: RunInput;
  /** The output of an upstream node of a workflow. */
  upstream<T = unknown>(nodeId: string): T;
  /** Return this to run the step again after `duration`, without consuming an attempt. */
  snooze(duration: Duration): Snooze;
  /**
   * Reports the attempt's progress: any JSON value (a number, `{ done, total }`...),
   * checked like an output (`InvalidInputError` if it is not storable JSON).
   * Returns at once; the latest value is stored within one heartbeat interval
   * (`leaseTtl / 3`) and shown as `progress` by `listSteps`.
   */
  progress(value: unknown): void;
}
