export { CycloneHealthIndicator, type CycloneHealthOptions } from './cyclone.health-indicator.js';
export { CycloneHealthModule } from './cyclone-health.module.js';
