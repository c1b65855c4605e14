// Loaded by jest outside its module system: keep this file free of relative imports.

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
  const container = await new PostgreSqlContainer('postgres:18-alpine')
    .withCommand(['postgres', '-c', 'fsync=off', '-c', 'max_connections=500'])
    .start();
  return {
    url: container.getConnectionUri(),
    source: 'testcontainers',
    stop: async () => void (await container.stop()),
  };
}

async function startEmbedded(): Promise<TestServer> {
  // The package's own test server (built by pretest): a throwaway embedded PostgreSQL.
  const { startTestServer: startPackageTestServer } = await import('cyclone-nestjs/testing');
  const server = await startPackageTestServer();
  return { url: server.url, source: 'embedded', stop: () => server.stop() };
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
