import { messages } from '../cyclone.messages.js';
import { DashboardUnguardedError } from '../errors/dashboard-unguarded.error.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { checkKnownKeys } from '../common/validate.js';
import { DEFAULT_DASHBOARD_PATH } from './dashboard.constants.js';
import {
  DASHBOARD_OPTION_NAMES,
  type CycloneDashboardOptions,
  type ResolvedDashboardOptions,
} from './dashboard-options.interface.js';

/** Segments of a path: the characters of a URL path that need no encoding. */
const PATH = /^\/$|^(\/[A-Za-z0-9._~-]+)+\/?$/;

/** Validates the module's options; a dashboard without a guard is refused unless allowed. */
export function resolveDashboardOptions(options: CycloneDashboardOptions): ResolvedDashboardOptions {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError(messages.dashboardOption('options', 'must be an object', options));
  }
  checkKnownKeys('CycloneDashboardModule.forRoot options', options, DASHBOARD_OPTION_NAMES);
  const { path = DEFAULT_DASHBOARD_PATH, guard, imports, readOnly = false, allowUnauthenticated = false } = options;
  if (typeof path !== 'string' || !PATH.test(path) || path.length > 200) {
    throw new InvalidOptionError(
      messages.dashboardOption('path', 'must be a URL path such as "/cyclone": segments of letters, digits and . _ ~ -', path),
    );
  }
  const isGuard =
    typeof guard === 'function' || (typeof guard === 'object' && guard !== null && typeof guard.canActivate === 'function');
  if (guard !== undefined && !isGuard) {
    throw new InvalidOptionError(messages.dashboardOption('guard', 'must be a CanActivate class or instance', guard));
  }
  if (imports !== undefined && !Array.isArray(imports)) {
    throw new InvalidOptionError(messages.dashboardOption('imports', 'must be an array of modules', imports));
  }
  for (const [name, value] of [
    ['readOnly', readOnly],
    ['allowUnauthenticated', allowUnauthenticated],
  ] as const) {
    if (typeof value !== 'boolean') throw new InvalidOptionError(messages.dashboardOption(name, 'must be true or false', value));
  }
  const normalised = path === '/' ? '/' : path.replace(/\/$/, '');
  if (guard === undefined && !allowUnauthenticated) throw new DashboardUnguardedError(normalised);
  return { path: normalised, guard: guard ?? null, readOnly };
}
