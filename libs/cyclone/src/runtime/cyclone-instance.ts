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

  /**
   * Names of the modules that list CycloneModule in their own imports, for
   * the warning. (Nest also links a global module into every module's
   * imports, so the container's import graph would name them all.) By name:
   * importing CycloneModule here would make the two files import each other.
   */
  private importers(): string[] {
    const names = new Set<string>();
    for (const module of this.modules.values()) {
      const declared = (Reflect.getMetadata('imports', module.metatype) ?? []) as unknown[];
      if (declared.some(isCycloneImport)) names.add(module.metatype.name);
    }
    return [...names];
  }
}

function isCycloneImport(entry: unknown): boolean {
  const module = (entry as { module?: { name?: string } } | null)?.module;
  return module?.name === 'CycloneModule';
}
