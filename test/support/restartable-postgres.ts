import { createScratchPostgres, type ScratchPostgres } from './scratch-postgres.js';

/**
 * A PostgreSQL server of one test's own, which the test may stop and start
 * again (the shared server of the global setup must never go away). Its data
 * survives a restart; `destroy()` stops it and deletes its directory.
 */
export class RestartablePostgres {
  private running = false;

  private constructor(private readonly scratch: ScratchPostgres) {}

  get url(): string {
    return this.scratch.url;
  }

  static async create(): Promise<RestartablePostgres> {
    const scratch = await createScratchPostgres({
      prefix: 'cyclone-restart-pg-',
      persistent: true,
      // Durability across power loss is not under test; a clean stop and start keeps the data.
      settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' },
      onError: (message) => process.stderr.write(`[restartable postgres] ${message}\n`),
    });
    const pg = new RestartablePostgres(scratch);
    try {
      await pg.start();
    } catch (err) {
      await pg.destroy();
      throw err;
    }
    return pg;
  }

  async start(): Promise<void> {
    await this.scratch.server.start();
    this.running = true;
  }

  /** Fast shutdown (SIGINT): open connections are terminated, the data is kept. */
  async stop(): Promise<void> {
    this.running = false;
    await this.scratch.server.stop();
  }

  get isRunning(): boolean {
    return this.running;
  }

  async destroy(): Promise<void> {
    this.running = false;
    await this.scratch.destroy();
  }
}
