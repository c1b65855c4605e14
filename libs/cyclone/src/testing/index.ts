export { CycloneTestEnv, type CycloneTestEnvOptions } from './cyclone-test-env.js';
export { TestDatabase } from './test-database.js';
export { startTestServer, type TestServer } from './test-server.js';
