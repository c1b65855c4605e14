import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper.js';

export type HostClass = abstract new (...args: never[]) => unknown;

/**
 * The class of a provider that a decorator marked with `key` (`@Step`,
 * `@Workflow`): found by the marker on the class; a provider made with
 * `useValue` or `useFactory` has no class in its wrapper, so its instance's
 * constructor is checked instead.
 */
export function markedHostClass(wrapper: InstanceWrapper, key: string): HostClass | undefined {
  const candidates = [wrapper.metatype, (wrapper.instance as object | undefined)?.constructor];
  for (const candidate of candidates) {
    if (typeof candidate === 'function' && Reflect.getMetadata(key, candidate)) return candidate as HostClass;
  }
  return undefined;
}
