export { CycloneDashboardModule } from './cyclone-dashboard.module.js';
export type { CycloneDashboardOptions } from './dashboard-options.interface.js';
export type * from './dashboard-api.interface.js';
