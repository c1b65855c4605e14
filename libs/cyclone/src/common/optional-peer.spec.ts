import { describe, expect, it } from '@jest/globals';
import { MissingDependencyError } from '../errors/missing-dependency.error.js';
import { isInstalled, isMissing, requireOptional } from './optional-peer.js';

describe('optional peers', () => {
  it('a package that is not installed is a MissingDependencyError naming it, the feature and the install command', () => {
    let caught: unknown;
    try {
      requireOptional('cyclone-no-such-package', 'The frobnicator');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(MissingDependencyError);
    expect(caught).toMatchObject({ code: 'missing_dependency', packageName: 'cyclone-no-such-package' });
    expect((caught as Error).message).toBe(
      'The frobnicator needs the package cyclone-no-such-package, which is not installed. Install it with `npm install cyclone-no-such-package`.',
    );
    expect(isInstalled('cyclone-no-such-package')).toBe(false);
  });

  it('an installed package loads', () => {
    expect(isInstalled('prom-client')).toBe(true);
    expect(typeof requireOptional<{ Registry: unknown }>('prom-client', 'Metrics').Registry).toBe('function');
  });

  it('only the package itself missing counts: a dependency missing inside it is a broken install, thrown as it is', () => {
    const notFound = (message: string, code = 'MODULE_NOT_FOUND') => Object.assign(new Error(message), { code });
    expect(isMissing(notFound("Cannot find module 'prom-client'\nRequire stack:\n- /app/main.js"), 'prom-client')).toBe(true);
    expect(isMissing(notFound("Cannot find package 'prom-client' imported from /app/main.js", 'ERR_MODULE_NOT_FOUND'), 'prom-client')).toBe(true);
    expect(
      isMissing(notFound("Cannot find module 'tdigest'\nRequire stack:\n- /app/node_modules/prom-client/lib/summary.js"), 'prom-client'),
    ).toBe(false);
    expect(isMissing(new Error("Cannot find module 'prom-client'"), 'prom-client')).toBe(false);
    expect(isMissing(notFound("Cannot find module '@opentelemetry/api'"), '@opentelemetry/api')).toBe(true);
  });
});
