import type * as OtelApi from '@opentelemetry/api';
import { requireOptional } from '../common/optional-peer.js';
import { CycloneTracer } from './cyclone-tracer.js';
import { OtelTracer } from './otel-tracer.js';

const API = '@opentelemetry/api';

/**
 * The tracer for the resolved option. Spans record only once the app
 * registers an OpenTelemetry SDK, so an installed API costs nothing until then.
 */
export function createTracer(tracing: boolean): CycloneTracer {
  if (!tracing) return new CycloneTracer();
  return new OtelTracer(requireOptional<typeof OtelApi>(API, 'The tracing option'));
}
