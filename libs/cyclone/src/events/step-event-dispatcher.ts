import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { errorMessage } from '../common/error-message.js';
import { messages } from '../cyclone.messages.js';
import type { StepEvent, StepEventName } from '../interfaces/step-event.interface.js';
import { CycloneStats } from '../runtime/cyclone-stats.js';
import type { StepFinished } from '../runtime/engine-events.js';

/** An `@OnStepEvent` method, bound to its provider. */
export interface StepEventListener {
  event: StepEventName;
  /** Only this kind's events; every kind's when null. */
  kind: string | null;
  /** `Class.method`, for messages. */
  host: string;
  call: (event: StepEvent) => unknown;
}

/** The events an attempt's outcome raises, in order. */
const RAISED: Partial<Record<StepFinished['outcome'], StepEventName>> = {
  completed: 'completed',
  retried: 'retried',
  discarded: 'discarded',
  cancelled: 'cancelled',
};

/**
 * Calls the `@OnStepEvent` listeners with each outcome this process
 * committed. A listener runs on a later turn of the event loop than the
 * write that committed the outcome, and nothing waits for it: a slow one
 * delays no step, a throwing or rejecting one is logged and changes none.
 * It observes the engine only when there is a listener.
 */
@Injectable()
export class StepEventDispatcher implements OnApplicationShutdown {
  private readonly logger = new Logger('Cyclone');
  private readonly listeners: StepEventListener[] = [];
  private unobserve?: () => void;

  constructor(private readonly stats: CycloneStats) {}

  /** Called by discovery at module init, before any worker or sweep starts. */
  add(listener: StepEventListener): void {
    this.listeners.push(listener);
    this.unobserve ??= this.stats.events.observe({ stepFinished: (finished) => this.raise(finished) });
  }

  /** After the workers' drain, whose outcomes still raise events. */
  onApplicationShutdown(): void {
    this.unobserve?.();
    this.unobserve = undefined;
  }

  private raise(finished: StepFinished): void {
    if (finished.failed) this.dispatch('failed', finished);
    const event = RAISED[finished.outcome];
    if (event) this.dispatch(event, finished);
  }

  private dispatch(event: StepEventName, finished: StepFinished): void {
    const listeners = this.listeners.filter((l) => l.event === event && (l.kind === null || l.kind === finished.kind));
    if (listeners.length === 0) return;
    setImmediate(() => {
      for (const listener of listeners) this.call(listener, payload(event, finished));
    });
  }

  private call(listener: StepEventListener, event: StepEvent): void {
    const failed = (err: unknown) =>
      this.logger.error(
        messages.stepEventListenerFailed(listener.host, event.event, event.nodeId, event.runId, errorMessage(err)),
        err instanceof Error ? err.stack : undefined,
      );
    try {
      const result = listener.call(event) as { then?: unknown } | undefined;
      if (typeof result?.then === 'function') (result as Promise<unknown>).then(undefined, failed);
    } catch (err) {
      failed(err);
    }
  }
}

/** Each listener gets its own copy, output included, so none can change what another sees. */
function payload(event: StepEventName, f: StepFinished): StepEvent {
  return {
    event,
    runId: f.runId,
    nodeId: f.nodeId,
    kind: f.kind,
    queue: f.queue,
    attempt: f.attempt,
    ...(event === 'completed' && f.outputJson !== undefined ? { output: JSON.parse(f.outputJson) as unknown } : {}),
    ...(f.error !== undefined && event !== 'completed' && event !== 'cancelled' ? { error: f.error } : {}),
    ...(f.errorKind !== undefined && event !== 'completed' && event !== 'cancelled' ? { errorKind: f.errorKind } : {}),
  };
}
