import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper.js';
import { STEP_HOST_METADATA, STEP_METADATA } from '../cyclone.constants.js';
import type { StepMetadata } from '../decorators/step.decorator.js';
import { InvalidStepHostError } from '../errors/invalid-step-host.error.js';
import { StepRegistry } from './step-registry.js';
import { WorkflowRegistry } from '../workflow/workflow-registry.js';
import { resolveStepOptions } from './step-options.js';

/**
 * Finds `@Step` handlers on the app's providers at startup. Classes are found
 * by the marker `@Step` leaves on them; a provider made with `useValue` or
 * `useFactory` has no class in its wrapper, so its instance's constructor is
 * checked instead. The module's workflows are checked against them here.
 */
@Injectable()
export class StepExplorer implements OnModuleInit {
  private readonly logger = new Logger('Cyclone');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly registry: StepRegistry,
    private readonly workflows: WorkflowRegistry,
  ) {}

  onModuleInit(): void {
    const seen = new Set<object>();
    for (const wrapper of this.discovery.getProviders()) {
      const host = this.hostClass(wrapper);
      if (!host) continue;
      const name = host.name || 'an anonymous provider';
      if (!wrapper.isDependencyTreeStatic()) {
        const [method] = Reflect.getMetadata(STEP_HOST_METADATA, host) as (string | symbol)[];
        const meta = Reflect.getMetadata(STEP_METADATA, host.prototype[method]) as StepMetadata;
        throw new InvalidStepHostError(name, meta.kind);
      }
      const instance = wrapper.instance as Record<string | symbol, unknown>;
      // One provider may be reachable through several modules' wrappers.
      if (seen.has(instance)) continue;
      seen.add(instance);
      for (const method of this.scanner.getAllMethodNames(Object.getPrototypeOf(instance))) {
        const handler = instance[method] as (...args: unknown[]) => unknown;
        const meta = Reflect.getMetadata(STEP_METADATA, handler) as StepMetadata | undefined;
        if (!meta) continue;
        this.registry.register({
          kind: meta.kind,
          host: `${name}.${method}`,
          handler: handler.bind(instance),
          ...resolveStepOptions(meta.kind, meta.options),
        });
      }
    }
    this.logger.log(`Registered steps: ${this.registry.kinds().join(', ') || '(none)'}`);
    // Workflows name step kinds, so they are checked once every step is known.
    this.workflows.compileAll(this.registry);
    if (this.workflows.names().length > 0) this.logger.log(`Registered workflows: ${this.workflows.names().join(', ')}`);
  }

  private hostClass(wrapper: InstanceWrapper): (abstract new (...args: never[]) => unknown) | undefined {
    const candidates = [wrapper.metatype, (wrapper.instance as object | undefined)?.constructor];
    for (const candidate of candidates) {
      if (typeof candidate === 'function' && Reflect.getMetadata(STEP_HOST_METADATA, candidate)) {
        return candidate as abstract new (...args: never[]) => unknown;
      }
    }
    return undefined;
  }
}
