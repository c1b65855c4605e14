export {
  CycloneTestEnv,
  type CycloneTestEnvOptions,
  type AttemptEndedOptions,
} from './cyclone-test-env.js';
export { waitForPasses, type WaitForPassesOptions } from './wait-for-passes.js';
export type { LoopName } from '../common/loop.js';
export type { AttemptEnded, AttemptEnding } from '../runtime/engine-events.js';
export { TestDatabase } from './test-database.js';
export { startTestServer, type TestServer } from './test-server.js';
