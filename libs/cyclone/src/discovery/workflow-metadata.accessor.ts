import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper.js';
import { WORKFLOW_HOST_METADATA, WORKFLOW_METADATA } from '../cyclone.constants.js';
import type { WorkflowMetadata } from '../decorators/workflow.decorator.js';
import { markedHostClass, type HostClass } from './marked-host.js';

/** What `@Workflow` left on a provider, read without touching a registry. */
export class WorkflowMetadataAccessor {
  /** The class of a provider with `@Workflow` methods (see markedHostClass). */
  hostClass(wrapper: InstanceWrapper): HostClass | undefined {
    return markedHostClass(wrapper, WORKFLOW_HOST_METADATA);
  }

  workflowOf(method: unknown): WorkflowMetadata | undefined {
    return typeof method === 'function'
      ? (Reflect.getMetadata(WORKFLOW_METADATA, method) as WorkflowMetadata | undefined)
      : undefined;
  }

  /** The first workflow a host declares, to name it in an error before its instance exists. */
  firstName(host: HostClass): string {
    const [method] = Reflect.getMetadata(WORKFLOW_HOST_METADATA, host) as (string | symbol)[];
    const declared = (host.prototype as Record<string | symbol, object>)[method];
    return String((Reflect.getMetadata(WORKFLOW_METADATA, declared) as WorkflowMetadata).name);
  }
}
