export { CycloneTestEnv, type CycloneTestEnvOptions } from './cyclone-test-env.js';
export { TestDatabase } from './test-database.js';
