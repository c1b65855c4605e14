import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper.js';
import { STEP_HOST_METADATA, STEP_METADATA } from '../cyclone.constants.js';
import type { StepMetadata } from '../decorators/step.decorator.js';
import { markedHostClass, type HostClass } from './marked-host.js';

/** What `@Step` left on a provider, read without touching the registry. */
export class StepMetadataAccessor {
  /** The class of a provider that has `@Step` methods (see markedHostClass). */
  hostClass(wrapper: InstanceWrapper): HostClass | undefined {
    return markedHostClass(wrapper, STEP_HOST_METADATA);
  }

  /** The step of one method, if it is a handler. */
  stepOf(method: unknown): StepMetadata | undefined {
    return typeof method === 'function' ? (Reflect.getMetadata(STEP_METADATA, method) as StepMetadata | undefined) : undefined;
  }

  /** The first kind a host declares, to name it in an error before its instance exists. */
  firstKind(host: HostClass): string {
    const [method] = Reflect.getMetadata(STEP_HOST_METADATA, host) as (string | symbol)[];
    const handler = (host.prototype as Record<string | symbol, object>)[method];
    return (Reflect.getMetadata(STEP_METADATA, handler) as StepMetadata).kind;
  }
}
