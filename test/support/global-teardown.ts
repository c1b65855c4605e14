import type { TestRedis, TestServer } from './global-setup.js';

export default async function globalTeardown(): Promise<void> {
  const state = globalThis as { __cycloneTestServer?: TestServer; __cycloneTestRedis?: TestRedis };
  // Both even if one fails to stop, so neither outlives the run.
  const stopped = await Promise.allSettled([state.__cycloneTestServer?.stop(), state.__cycloneTestRedis?.stop()]);
  for (const result of stopped) if (result.status === 'rejected') throw result.reason;
}
