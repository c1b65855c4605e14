import { Injectable } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { checkName } from '../common/validate.js';
import { messages } from '../cyclone.messages.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { InvalidStepHostError } from '../errors/invalid-step-host.error.js';
import type { WorkflowContext } from '../interfaces/workflow-context.interface.js';
import type { StepContext } from '../interfaces/step-context.interface.js';
import { StepRegistry } from '../steps/step-registry.js';
import { CodeWorkflowRegistry } from '../workflow/code/code-workflow-registry.js';
import { resolveWorkflowOptions } from '../workflow/code/resolve-workflow-options.js';
import { WorkflowRunner } from '../workflow/code/workflow-runner.js';
import { WorkflowRegistry } from '../workflow/workflow-registry.js';
import { WorkflowMetadataAccessor } from './workflow-metadata.accessor.js';

/**
 * Wires `@Workflow` methods into the registry, found like `@Step` handlers
 * (the marker on their class), once the steps and the module's DAG
 * workflows are registered: a workflow's name is the kind its node is
 * claimed by and the name its runs are listed under, so it may be neither a
 * step kind nor another workflow's name.
 */
@Injectable()
export class WorkflowExplorer {
  private readonly metadata = new WorkflowMetadataAccessor();

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly registry: CodeWorkflowRegistry,
    private readonly steps: StepRegistry,
    private readonly dagWorkflows: WorkflowRegistry,
    private readonly runner: WorkflowRunner,
  ) {}

  explore(): void {
    const seen = new Set<object>();
    for (const wrapper of this.discovery.getProviders()) {
      const host = this.metadata.hostClass(wrapper);
      if (!host) continue;
      const hostName = host.name || 'an anonymous provider';
      // Workflows run on workers, outside any request.
      if (!wrapper.isDependencyTreeStatic()) {
        throw new InvalidStepHostError(hostName, '', `@Workflow('${this.metadata.firstName(host)}')`);
      }
      const instance = wrapper.instance as Record<string | symbol, unknown>;
      if (seen.has(instance)) continue;
      seen.add(instance);
      for (const method of this.scanner.getAllMethodNames(Object.getPrototypeOf(instance))) {
        const fn = instance[method] as (input: unknown, wf: WorkflowContext) => unknown;
        const meta = this.metadata.workflowOf(fn);
        if (meta) this.register(`${hostName}.${method}`, meta.name, meta.options, fn.bind(instance));
      }
    }
  }

  private register(host: string, given: unknown, options: Parameters<typeof resolveWorkflowOptions>[1], method: (input: unknown, wf: WorkflowContext) => unknown): void {
    if (typeof given !== 'string') throw new InvalidOptionError(messages.workflowNameRequired(host, given));
    const name = checkName(given, `@Workflow name on ${host}`);
    if (this.steps.find(name)) throw new InvalidOptionError(messages.workflowNameTaken(name, host, `a step kind (${this.steps.find(name)!.host})`));
    if (this.dagWorkflows.find(name)) throw new InvalidOptionError(messages.workflowNameTaken(name, host, 'the name of a workflow in CycloneModule.forRoot({ workflows })'));
    const { version, maxNodes, node } = resolveWorkflowOptions(name, options);
    const workflow = {
      name,
      host,
      method,
      version,
      maxNodes,
      step: {
        kind: name,
        host,
        handler: (input: unknown, ctx: StepContext) => this.runner.run(workflow, input, ctx),
        ...node,
      },
    };
    this.registry.register(workflow);
  }
}
