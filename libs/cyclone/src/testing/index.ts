export {
  CycloneTestEnv,
  type CycloneTestEnvOptions,
  type WaitForPassesOptions,
  type AttemptEndedOptions,
} from './cyclone-test-env.js';
export type { LoopName } from '../common/loop.js';
export type { AttemptEnded, AttemptEnding } from '../runtime/engine-events.js';
export { TestDatabase } from './test-database.js';
export { startTestServer, type TestServer } from './test-server.js';
