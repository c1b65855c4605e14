import { Injectable, Logger } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { messages } from '../cyclone.messages.js';

/** Per app, the CycloneModule import that runs workers and maintenance. */
const primaries = new WeakMap<ModulesContainer, CycloneInstance>();

/**
 * One import of CycloneModule in an app. Importing the module twice must
 * not start two sets of workers and loops: the first import to boot runs
 * them, a second only provides its CycloneClient, and says so once.
 */
@Injectable()
export class CycloneInstance {
  private readonly logger = new Logger('Cyclone');
  private decided?: boolean;

  constructor(private readonly modules: ModulesContainer) {}

  /** Whether this import runs workers and maintenance; decided at its first call. */
  get isPrimary(): boolean {
    if (this.decided === undefined) {
      const primary = primaries.get(this.modules);
      this.decided = primary === undefined;
      if (this.decided) primaries.set(this.modules, this);
      else this.logger.warn(messages.importedTwice(this.importers()));
    }
    return this.decided;
  }

  /** Lets a later app context on the same container start again once this one has stopped. */
  release(): void {
    if (primaries.get(this.modules) === this) primaries.delete(this.modules);
  }

  /** Names of the modules that import CycloneModule, for the warning. */
  private importers(): string[] {
    const names = new Set<string>();
    for (const module of this.modules.values()) {
      for (const imported of module.imports) {
        if (imported.metatype?.name === 'CycloneModule') names.add(module.metatype?.name ?? 'an anonymous module');
      }
    }
    return [...names];
  }
}
