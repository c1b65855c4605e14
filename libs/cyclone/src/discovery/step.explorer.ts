import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { CYCLONE_OPTIONS } from '../cyclone.constants.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import { ScheduleRegistry } from '../schedules/schedule-registry.js';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { InvalidStepHostError } from '../errors/invalid-step-host.error.js';
import { resolveStepOptions } from '../steps/step-options.js';
import { StepRegistry } from '../steps/step-registry.js';
import { WorkflowRegistry } from '../workflow/workflow-registry.js';
import { StepMetadataAccessor } from './step-metadata.accessor.js';
import { WorkflowExplorer } from './workflow.explorer.js';
import { CodeWorkflowRegistry } from '../workflow/code/code-workflow-registry.js';

/**
 * Wires `@Step` handlers into the registry when the module initialises,
 * before any worker starts (workers start at application bootstrap). The
 * module's workflows and schedules name step kinds, so they are compiled
 * once every step is known; a bad graph or cron expression fails the boot
 * here. `@Workflow` methods come last (WorkflowExplorer): their names must
 * differ from every step kind and DAG workflow.
 */
@Injectable()
export class StepExplorer implements OnModuleInit {
  private readonly logger = new Logger('Cyclone');
  private readonly metadata = new StepMetadataAccessor();

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly registry: StepRegistry,
    private readonly workflows: WorkflowRegistry,
    private readonly schedules: ScheduleRegistry,
    @Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions,
    private readonly workflowExplorer: WorkflowExplorer,
    private readonly codeWorkflows: CodeWorkflowRegistry,
  ) {}

  onModuleInit(): void {
    this.registerSteps();
    this.logger.log(`Registered steps: ${this.registry.kinds().join(', ') || '(none)'}`);
    this.workflows.compileAll(this.registry);
    this.workflowExplorer.explore();
    const workflows = [...this.workflows.names(), ...this.codeWorkflows.all().map((w) => `${w.name} v${w.version}`)];
    if (workflows.length > 0) this.logger.log(`Registered workflows: ${workflows.join(', ')}`);
    this.schedules.compileAll(this.registry, this.options.schedules, this.options.maxPayloadBytes);
    const schedules = this.schedules.all();
    if (schedules.length > 0) this.logger.log(`Registered schedules: ${schedules.map((s) => `${s.name} (${s.cron})`).join(', ')}`);
  }

  private registerSteps(): void {
    const seen = new Set<object>();
    for (const wrapper of this.discovery.getProviders()) {
      const host = this.metadata.hostClass(wrapper);
      if (!host) continue;
      const name = host.name || 'an anonymous provider';
      // Workers run outside any request: a request-scoped host has no instance to call.
      if (!wrapper.isDependencyTreeStatic()) throw new InvalidStepHostError(name, this.metadata.firstKind(host));
      const instance = wrapper.instance as Record<string | symbol, unknown>;
      // One provider may be reachable through several modules' wrappers.
      if (seen.has(instance)) continue;
      seen.add(instance);
      for (const method of this.scanner.getAllMethodNames(Object.getPrototypeOf(instance))) {
        const handler = instance[method] as (...args: unknown[]) => unknown;
        const meta = this.metadata.stepOf(handler);
        if (!meta) continue;
        this.registry.register({
          kind: meta.kind,
          host: `${name}.${method}`,
          handler: handler.bind(instance),
          ...resolveStepOptions(meta.kind, meta.options),
        });
      }
    }
  }
}
