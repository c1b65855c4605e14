import type { Logger } from '@nestjs/common';
import { toMs, type Duration } from '../common/duration.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import type { StepContext } from '../interfaces/step-context.interface.js';
import { Snooze } from '../interfaces/snooze.js';
import type { ClaimedStep } from '../sql/claim.sql.js';

/** The `ctx` a handler receives, built from the claimed row. */
export class StepContextImpl implements StepContext {
  readonly runId: string;
  readonly nodeId: string;
  readonly kind: string;
  readonly attempt: number;
  readonly reclaims: number;
  readonly fencingToken: number;
  readonly input: unknown;
  private readonly upstreamOutputs: Record<string, unknown>;

  constructor(
    row: ClaimedStep,
    readonly signal: AbortSignal,
    readonly deadline: Date | null,
    readonly logger: Logger,
    private readonly reportProgress: (value: unknown) => void,
  ) {
    this.runId = row.run_id;
    this.nodeId = row.node_id;
    this.kind = row.kind;
    this.attempt = row.attempt;
    this.reclaims = row.reclaims;
    this.fencingToken = Number(row.lease_generation);
    this.input = row.input;
    this.upstreamOutputs = row.upstream ?? {};
  }

  upstream<T = unknown>(nodeId: string): T {
    if (!(nodeId in this.upstreamOutputs)) {
      throw new InvalidOptionError(
        `Node "${this.nodeId}" has no upstream node "${nodeId}"; its upstreams are: ${Object.keys(this.upstreamOutputs).join(', ') || '(none)'}.`,
      );
    }
    return this.upstreamOutputs[nodeId] as T;
  }

  snooze(duration: Duration): Snooze {
    return new Snooze(toMs(duration, 'snooze'));
  }

  progress(value: unknown): void {
    this.reportProgress(value);
  }
}
