import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { STEP_EVENT_HOST_METADATA, STEP_EVENT_METADATA } from '../cyclone.constants.js';
import { messages } from '../cyclone.messages.js';
import { checkName } from '../common/validate.js';
import type { StepEventMetadata } from '../decorators/on-step-event.decorator.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { InvalidStepHostError } from '../errors/invalid-step-host.error.js';
import { StepEventDispatcher } from '../events/step-event-dispatcher.js';
import { STEP_EVENTS, type StepEvent } from '../interfaces/step-event.interface.js';
import { StepRegistry } from '../steps/step-registry.js';

/**
 * Wires `@OnStepEvent` methods into the dispatcher when the module
 * initialises. Found like `@Step` hosts: by the marker on their class (or,
 * for a `useValue`/`useFactory` provider, on its instance's constructor).
 * A listener for a kind no handler of this app runs is suspect but may be
 * meant (a sweep settles steps of any kind), so it is warned of, not refused.
 */
@Injectable()
export class StepEventExplorer implements OnModuleInit, OnApplicationBootstrap {
  private readonly logger = new Logger('Cyclone');
  /** Listeners of one kind, checked against the registered kinds once every module has initialised. */
  private readonly ofKind: { host: string; event: string; kind: string }[] = [];

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly dispatcher: StepEventDispatcher,
    private readonly steps: StepRegistry,
  ) {}

  onModuleInit(): void {
    const seen = new Set<object>();
    for (const wrapper of this.discovery.getProviders()) {
      const host = [wrapper.metatype, (wrapper.instance as object | undefined)?.constructor].find(
        (candidate) => typeof candidate === 'function' && Reflect.getMetadata(STEP_EVENT_HOST_METADATA, candidate),
      ) as (abstract new (...args: never[]) => unknown) | undefined;
      if (!host) continue;
      const name = host.name || 'an anonymous provider';
      if (!wrapper.isDependencyTreeStatic()) throw new InvalidStepHostError(name, '', '@OnStepEvent listeners');
      const instance = wrapper.instance as Record<string | symbol, unknown>;
      if (seen.has(instance)) continue;
      seen.add(instance);
      for (const method of this.scanner.getAllMethodNames(Object.getPrototypeOf(instance))) {
        const fn = instance[method] as (event: StepEvent) => unknown;
        const listened = (typeof fn === 'function' ? Reflect.getMetadata(STEP_EVENT_METADATA, fn) : undefined) as
          | StepEventMetadata[]
          | undefined;
        for (const meta of listened ?? []) this.register(`${name}.${method}`, meta, fn.bind(instance));
      }
    }
  }

  onApplicationBootstrap(): void {
    for (const { host, event, kind } of this.ofKind) {
      if (!this.steps.find(kind)) this.logger.warn(messages.listenerForUnknownKind(host, event, kind));
    }
  }

  private register(host: string, { event, kind }: StepEventMetadata, call: (event: StepEvent) => unknown): void {
    if (!STEP_EVENTS.includes(event)) throw new InvalidOptionError(messages.unknownStepEvent(host, event, STEP_EVENTS));
    if (kind !== undefined) this.ofKind.push({ host, event, kind: checkName(kind, `@OnStepEvent kind of ${host}`) });
    this.dispatcher.add({ event, kind: kind ?? null, host, call });
  }
}
