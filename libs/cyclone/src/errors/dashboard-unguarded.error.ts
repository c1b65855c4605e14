import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** CycloneDashboardModule was given no guard and not told that it may be served to anyone. */
export class DashboardUnguardedError extends CycloneError {
  constructor(path: string) {
    super('dashboard_unguarded', messages.dashboardUnguarded(path));
  }
}
