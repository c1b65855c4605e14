import type { AttemptEnding } from '../runtime/engine-events.js';
import type { ClaimedStep } from '../sql/claim.sql.js';
import type { ErrorKind } from '../sql/names.js';

/** What a producer span is about: one enqueue, a batch of one kind, or a workflow start. */
export interface ProducerInfo {
  operation: 'enqueue' | 'enqueue_many' | 'start';
  queue: string;
  /** The step kind of a job, or the workflow's name. */
  name: string;
  /** Jobs in a batch (enqueueMany). */
  count?: number;
}

/** How an attempt ended, for its span. */
export interface AttemptEnd {
  outcome: AttemptEnding;
  failed: boolean;
  error?: string;
  errorKind?: ErrorKind;
  /** What the handler threw, for the span's exception event. */
  thrown?: unknown;
}

/** The span of one attempt: the handler runs inside it, and it ends with the outcome. */
export interface AttemptSpan {
  /** Runs `fn` with the span active, so spans the handler starts are its children. */
  run<T>(fn: () => T): T;
  end(end: AttemptEnd): void;
}

/**
 * Cyclone's spans: a producer span around each enqueue and start, whose
 * trace context is stored with the run, and a consumer span around each
 * attempt, continuing that trace in whichever process runs the step. The
 * module provides the OpenTelemetry one when `@opentelemetry/api` is
 * installed (it records only once the app registers an SDK), else this one,
 * which does nothing.
 */
export class CycloneTracer {
  /**
   * Runs an enqueue inside its producer span. `work` gets the trace context
   * to store with the run (JSON), or null when there is none to continue.
   */
  produce<T>(_info: ProducerInfo, work: (traceContext: string | null) => Promise<T>): Promise<T> {
    return work(null);
  }

  /** Starts the span of a claimed step's attempt. */
  attempt(_step: ClaimedStep, _queue: string): AttemptSpan {
    return NO_SPAN;
  }
}

const NO_SPAN: AttemptSpan = {
  run: (fn) => fn(),
  end: () => undefined,
};
