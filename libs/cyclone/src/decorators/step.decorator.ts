import { STEP_HOST_METADATA, STEP_METADATA } from '../cyclone.constants.js';
import type { StepOptions } from '../interfaces/step-options.interface.js';
import type { StepRef } from '../definitions/define-step.js';

export interface StepMetadata {
  kind: string;
  options: StepOptions;
}

/**
 * Marks a provider method as the handler of a step kind. The method receives
 * `(input, ctx)` and returns the step's output. Options here are the kind's
 * defaults; an enqueue can override them.
 *
 * Besides the method, the class is marked too: Nest's discovery indexes
 * classes, so the explorer finds step hosts without scanning every method of
 * every provider.
 */
export function Step(kind: string | StepRef<any, any>, options?: StepOptions): MethodDecorator {
  return (target, propertyKey, descriptor) => {
    const metadata: StepMetadata =
      typeof kind === 'string'
        ? { kind, options: { ...options } }
        : { kind: kind.kind, options: { ...kind.options, ...options } };
    Reflect.defineMetadata(STEP_METADATA, metadata, descriptor.value as object);
    const host = target.constructor;
    const methods: (string | symbol)[] = Reflect.getMetadata(STEP_HOST_METADATA, host) ?? [];
    Reflect.defineMetadata(STEP_HOST_METADATA, [...methods, propertyKey], host);
    return descriptor;
  };
}
