import type { TestServer } from './global-setup.js';

export default async function globalTeardown(): Promise<void> {
  const server = (globalThis as { __cycloneTestServer?: TestServer }).__cycloneTestServer;
  await server?.stop();
}
