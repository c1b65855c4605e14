import { createRequire } from 'node:module';
import { MissingDependencyError } from '../errors/missing-dependency.error.js';

/** Resolves from the package's own place, so an optional peer is found where the app installed it. */
const requireFromHere = createRequire(import.meta.url);

/**
 * Loads an optional peer dependency (a CommonJS package, or ESM that Node's
 * `require` loads) when the feature that needs it is configured. Loading is
 * synchronous on purpose: the feature fails while the app's modules are
 * being defined or its options resolved, before any connection is open.
 * Its absence is a MissingDependencyError naming the package and the
 * feature; any other failure to load it (a broken install) is thrown as it is.
 */
export function requireOptional<T>(packageName: string, feature: string): T {
  try {
    return requireFromHere(packageName) as T;
  } catch (err) {
    if (isMissing(err, packageName)) throw new MissingDependencyError(packageName, feature, err);
    throw err;
  }
}

/** Whether an optional peer is installed, without loading it. */
export function isInstalled(packageName: string): boolean {
  try {
    requireFromHere.resolve(packageName);
    return true;
  } catch (err) {
    if (isMissing(err, packageName)) return false;
    throw err;
  }
}

/** Whether `err` says that `packageName` itself is not installed (not a file inside it, nor one of its own imports). */
export function isMissing(err: unknown, packageName: string): boolean {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  return (
    (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
    typeof message === 'string' &&
    new RegExp(`['"]${packageName.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}['"]`).test(message)
  );
}
