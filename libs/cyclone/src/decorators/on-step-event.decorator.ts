import { STEP_EVENT_HOST_METADATA, STEP_EVENT_METADATA } from '../cyclone.constants.js';
import type { StepRef } from '../definitions/define-step.js';
import type { StepEventName } from '../interfaces/step-event.interface.js';

export interface StepEventMetadata {
  event: StepEventName;
  /** Only this kind's events; every kind's when undefined. */
  kind: string | undefined;
}

/**
 * Calls a provider method with each step event of this process: `completed`,
 * `failed`, `retried`, `discarded` or `cancelled`, of every kind or of one.
 * It is called after the outcome has committed, with a `StepEvent`; whatever
 * it does, returns or throws, the step is not affected (a failure is logged).
 * A method may listen to several events with several decorators.
 */
export function OnStepEvent(event: StepEventName, kind?: string | StepRef<any, any>): MethodDecorator {
  return (target, propertyKey, descriptor) => {
    const metadata: StepEventMetadata = { event, kind: typeof kind === 'object' && kind !== null ? kind.kind : kind };
    const method = descriptor.value as object;
    const listened: StepEventMetadata[] = Reflect.getMetadata(STEP_EVENT_METADATA, method) ?? [];
    Reflect.defineMetadata(STEP_EVENT_METADATA, [...listened, metadata], method);
    // Marks the class too, so discovery finds listener hosts without scanning every provider's methods.
    const host = target.constructor;
    const methods: (string | symbol)[] = Reflect.getMetadata(STEP_EVENT_HOST_METADATA, host) ?? [];
    if (!methods.includes(propertyKey)) Reflect.defineMetadata(STEP_EVENT_HOST_METADATA, [...methods, propertyKey], host);
    return descriptor;
  };
}
