import { context, propagation, trace, SpanKind, type Attributes } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';

/** A finished span, as plain data (it crosses process boundaries in the two-process test). */
export interface SpanRecord {
  name: string;
  kind: keyof typeof SpanKind;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  attributes: Attributes;
  status: { code: number; message?: string };
  events: string[];
}

export function toRecord(span: ReadableSpan): SpanRecord {
  return {
    name: span.name,
    kind: SpanKind[span.kind] as keyof typeof SpanKind,
    traceId: span.spanContext().traceId,
    spanId: span.spanContext().spanId,
    parentSpanId: span.parentSpanContext?.spanId,
    attributes: { ...span.attributes },
    status: { ...span.status },
    events: span.events.map((e) => e.name),
  };
}

/**
 * What an app does to trace with OpenTelemetry, with the SDK's in-memory
 * exporter: a tracer provider, an AsyncLocalStorage context manager (so a
 * handler's spans nest under its step's span), and the W3C propagator (the
 * trace context stored with a run). `onEnd` sees each span as it ends.
 */
export function installTracing(onEnd?: (span: SpanRecord) => void): { exporter: InMemorySpanExporter; uninstall(): void } {
  const exporter = new InMemorySpanExporter();
  const processors: SpanProcessor[] = [new SimpleSpanProcessor(exporter)];
  if (onEnd) {
    processors.push({
      onStart: () => undefined,
      onEnd: (span) => onEnd(toRecord(span)),
      forceFlush: async () => undefined,
      shutdown: async () => undefined,
    });
  }
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: processors }));
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  return {
    exporter,
    uninstall: () => {
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}
