import { CycloneError } from './cyclone.error.js';
import { messages } from '../cyclone.messages.js';

/** The dashboard's front end is not where the package ships it: a broken install or an unbuilt checkout. */
export class DashboardAssetsMissingError extends CycloneError {
  constructor(looked: string[]) {
    super('dashboard_assets_missing', messages.dashboardAssetsMissing(looked));
  }
}
