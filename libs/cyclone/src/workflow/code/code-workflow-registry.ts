import { Injectable } from '@nestjs/common';
import { DEFAULT_QUEUE } from '../../cyclone.constants.js';
import { InvalidOptionError } from '../../errors/invalid-option.error.js';
import { messages } from '../../cyclone.messages.js';
import type { RegisteredWorkflow } from './registered-workflow.js';

/** The workflows written as code that this client runs and starts, filled by discovery at startup. */
@Injectable()
export class CodeWorkflowRegistry {
  private readonly workflows = new Map<string, RegisteredWorkflow>();

  register(workflow: RegisteredWorkflow): void {
    const existing = this.workflows.get(workflow.name);
    if (existing) {
      throw new InvalidOptionError(
        messages.workflowNameTaken(workflow.name, workflow.host, `the name of @Workflow on ${existing.host}`),
      );
    }
    this.workflows.set(workflow.name, workflow);
  }

  find(name: unknown): RegisteredWorkflow | undefined {
    return typeof name === 'string' ? this.workflows.get(name) : undefined;
  }

  all(): RegisteredWorkflow[] {
    return [...this.workflows.values()];
  }

  /** The workflows whose node runs on `queue`. */
  onQueue(queue: string): RegisteredWorkflow[] {
    return this.all().filter((w) => (w.step.queue ?? DEFAULT_QUEUE) === queue);
  }
}
