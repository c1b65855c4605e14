import { Inject, Injectable } from '@nestjs/common';
import { CYCLONE_OPTIONS } from '../cyclone.constants.js';
import { InvalidWorkflowError } from '../errors/invalid-workflow.error.js';
import { UnknownWorkflowError } from '../errors/unknown-workflow.error.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import type { StepRegistry } from '../steps/step-registry.js';
import { compileWorkflow, type CompiledWorkflow } from './compile-workflow.js';
import { WorkflowDefinition } from '../definitions/define-workflow.js';
import { describeValue } from '../cyclone.messages.js';

/** The workflows of the module options, checked once the steps are discovered. */
@Injectable()
export class WorkflowRegistry {
  private readonly workflows = new Map<string, CompiledWorkflow>();

  constructor(@Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions) {}

  /** Compiles every registered workflow; throws on the first invalid one. */
  compileAll(steps: StepRegistry): void {
    for (const def of this.options.workflows) {
      const compiled = compileWorkflow(def, steps, this.options);
      if (this.workflows.has(compiled.name)) {
        throw new InvalidWorkflowError(compiled.name, null, 'two workflows have this name; names must be unique.');
      }
      this.workflows.set(compiled.name, compiled);
    }
  }

  /** A registered workflow, by name or by its definition (the very one registered, not a namesake). */
  get(workflow: WorkflowDefinition | string): CompiledWorkflow {
    const name = typeof workflow === 'string' ? workflow : nameOf(workflow);
    const compiled = typeof name === 'string' ? this.workflows.get(name) : undefined;
    if (!compiled || (typeof workflow !== 'string' && workflow !== compiled.definition)) {
      throw new UnknownWorkflowError(typeof name === 'string' ? name : describeValue(name), compiled !== undefined);
    }
    return compiled;
  }

  /** A registered workflow by name, or undefined. */
  find(name: string): CompiledWorkflow | undefined {
    return this.workflows.get(name);
  }

  names(): string[] {
    return [...this.workflows.keys()];
  }
}

/** The name of a definition; for anything else the value itself, to describe in the error. */
function nameOf(workflow: unknown): unknown {
  try {
    return workflow instanceof WorkflowDefinition ? workflow.name : workflow;
  } catch {
    // A proxy whose traps throw.
    return workflow;
  }
}
