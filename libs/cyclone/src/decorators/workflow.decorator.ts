import { WORKFLOW_HOST_METADATA, WORKFLOW_METADATA } from '../cyclone.constants.js';
import type { WorkflowDefinition } from '../definitions/define-workflow.js';
import type { WorkflowOptions } from '../interfaces/code-workflow-options.interface.js';

export interface WorkflowMetadata {
  /** As given: a name, or a `defineWorkflow` reference (checked at discovery). */
  name: unknown;
  options: WorkflowOptions | undefined;
}

/**
 * Marks a provider method as a workflow written as code. The method receives
 * `(input, wf)`, makes its durable calls through `wf` (a WorkflowContext)
 * and returns the run's output. It runs again from the top after a crash, a
 * retry or a wake-up, and its recorded calls return what they returned the
 * first time. The class is marked too, so discovery finds workflow hosts by
 * their class, as it finds `@Step` hosts.
 */
export function Workflow(name: string | WorkflowDefinition<any, any>, options?: WorkflowOptions): MethodDecorator {
  return (target, propertyKey, descriptor) => {
    const metadata: WorkflowMetadata = {
      name: typeof name === 'object' && name !== null ? (name as WorkflowDefinition).name : name,
      options,
    };
    Reflect.defineMetadata(WORKFLOW_METADATA, metadata, descriptor.value as object);
    const host = target.constructor;
    const methods: (string | symbol)[] = Reflect.getMetadata(WORKFLOW_HOST_METADATA, host) ?? [];
    Reflect.defineMetadata(WORKFLOW_HOST_METADATA, [...methods, propertyKey], host);
    return descriptor;
  };
}
