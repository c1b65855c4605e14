import type { CanActivate, ModuleMetadata, Type } from '@nestjs/common';

export interface CycloneDashboardOptions {
  /** Where the dashboard is served, below the app's global prefix. Default `/cyclone`. */
  path?: string;
  /**
   * A Nest guard every request to the dashboard must pass: its pages, assets,
   * JSON API and actions. A `CanActivate` class (resolved from the module's
   * `imports` and the app's global providers) or an instance.
   */
  guard?: Type<CanActivate> | CanActivate;
  /** Modules that provide what the guard class injects. */
  imports?: ModuleMetadata['imports'];
  /**
   * Serve no actions: the POST routes are not registered at all, and the
   * pages show no buttons. Default false.
   */
  readOnly?: boolean;
  /**
   * Serve the dashboard without a guard. Without a guard the module refuses
   * to mount unless this is true: for local development, or a dashboard only
   * trusted users can reach.
   */
  allowUnauthenticated?: boolean;
}

export const DASHBOARD_OPTION_NAMES = ['path', 'guard', 'imports', 'readOnly', 'allowUnauthenticated'] as const;

/** The options as the dashboard uses them: validated, with defaults. */
export interface ResolvedDashboardOptions {
  /** Normalised: one leading slash, no trailing slash (`/` for the root). */
  path: string;
  guard: Type<CanActivate> | CanActivate | null;
  readOnly: boolean;
}
