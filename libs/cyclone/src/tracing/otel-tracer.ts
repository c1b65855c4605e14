import type * as OtelApi from '@opentelemetry/api';
import type { ClaimedStep } from '../sql/claim.sql.js';
import { CycloneTracer, type AttemptEnd, type AttemptSpan, type ProducerInfo } from './cyclone-tracer.js';

type Api = typeof OtelApi;

/** `messaging.system` of Cyclone's spans. */
const SYSTEM = 'cyclone';

/**
 * Cyclone's spans through the OpenTelemetry API only: the app brings the SDK,
 * its exporter and its propagator. Names and attributes follow the messaging
 * conventions (`{operation} {destination}`, `messaging.*`), with the step
 * kind as the name's destination, since that is what a reader looks for.
 */
export class OtelTracer extends CycloneTracer {
  private readonly tracer: OtelApi.Tracer;

  constructor(private readonly api: Api) {
    super();
    // A proxy: it records through whichever provider the app registers, before or after this.
    this.tracer = api.trace.getTracer('cyclone-nestjs');
  }

  override async produce<T>(info: ProducerInfo, work: (traceContext: string | null) => Promise<T>): Promise<T> {
    const { context, propagation, trace, SpanKind } = this.api;
    const span = this.tracer.startSpan(`${info.operation} ${info.name}`, {
      kind: SpanKind.PRODUCER,
      attributes: {
        'messaging.system': SYSTEM,
        'messaging.operation.type': 'send',
        'messaging.operation.name': info.operation,
        'messaging.destination.name': info.queue,
        [info.operation === 'start' ? 'cyclone.workflow' : 'cyclone.step.kind']: info.name,
        ...(info.count !== undefined ? { 'messaging.batch.message_count': info.count } : {}),
      },
    });
    const active = trace.setSpan(context.active(), span);
    const carrier: Record<string, string> = {};
    propagation.inject(active, carrier);
    const traceContext = Object.keys(carrier).length > 0 ? JSON.stringify(carrier) : null;
    try {
      const result = await context.with(active, () => work(traceContext));
      if (typeof result === 'string') span.setAttribute('messaging.message.id', result);
      return result;
    } catch (err) {
      this.recordError(span, err, err instanceof Error ? err.message : String(err));
      throw err;
    } finally {
      span.end();
    }
  }

  override attempt(step: ClaimedStep, queue: string): AttemptSpan {
    const { context, propagation, trace, ROOT_CONTEXT, SpanKind } = this.api;
    // The enqueuer's trace, from any process; without one, a trace of its own
    // rather than whatever context the claim happened to run in.
    const parent = step.trace_context ? propagation.extract(ROOT_CONTEXT, step.trace_context) : ROOT_CONTEXT;
    const span = this.tracer.startSpan(
      `process ${step.kind}`,
      {
        kind: SpanKind.CONSUMER,
        attributes: {
          'messaging.system': SYSTEM,
          'messaging.operation.type': 'process',
          'messaging.operation.name': 'process',
          'messaging.destination.name': queue,
          'messaging.message.id': step.run_id,
          'cyclone.run.id': step.run_id,
          'cyclone.node.id': step.node_id,
          'cyclone.step.kind': step.kind,
          'cyclone.step.attempt': step.attempt,
          'cyclone.step.max_attempts': step.max_attempts,
          'cyclone.step.reclaims': step.reclaims,
          'cyclone.lease.generation': Number(step.lease_generation),
        },
      },
      parent,
    );
    const active = trace.setSpan(parent, span);
    return {
      run: (fn) => context.with(active, fn),
      end: (end: AttemptEnd) => {
        span.setAttribute('cyclone.step.outcome', end.outcome);
        if (end.error !== undefined) this.recordError(span, end.thrown, end.error, end.errorKind);
        span.end();
      },
    };
  }

  private recordError(span: OtelApi.Span, thrown: unknown, message: string, kind?: string): void {
    const exception = exceptionOf(thrown, message);
    span.setAttribute('error.type', kind ?? exception.name ?? 'error');
    span.recordException(exception);
    span.setStatus({ code: this.api.SpanStatusCode.ERROR, message });
  }
}

/**
 * What a span records of a thrown value: its name and stack when it is an
 * Error, and the message Cyclone stored. Read defensively, since a handler
 * may throw anything (a proxy whose traps throw, a getter that throws) and
 * that must not break the worker that records it.
 */
function exceptionOf(thrown: unknown, message: string): { name?: string; message: string; stack?: string } {
  try {
    if (thrown instanceof Error) {
      const { name, stack } = thrown;
      return { name: typeof name === 'string' ? name : 'Error', message, stack: typeof stack === 'string' ? stack : undefined };
    }
  } catch {
    // A value that cannot be read is recorded by its stored message alone.
  }
  return { message };
}
