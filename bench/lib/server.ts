import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { createScratchPostgres } from '../../test/support/scratch-postgres.js';

/**
 * Server settings of the benchmark's PostgreSQL. Durability stays as shipped
 * (fsync on, synchronous_commit on, full_page_writes on) so that every commit
 * costs what it costs in production; only capacity is raised.
 */
export const SERVER_SETTINGS: Record<string, string> = {
  // W10's fleet holds up to 20 × (a pool of 14 + 1 LISTEN) while it drains, beside its producer.
  max_connections: '400',
  shared_buffers: '256MB',
  // Lets every run report which statements its time went to.
  shared_preload_libraries: 'pg_stat_statements',
  'pg_stat_statements.track': 'all',
  'pg_stat_statements.max': '5000',
};

export interface BenchServer {
  /** postgres://… of the `postgres` database. */
  adminUrl: string;
  host: string;
  port: number;
  user: string;
  password: string;
  dataDir: string;
  urlFor(database: string): string;
  /**
   * Crashes the server (SIGQUIT to the postmaster: an immediate shutdown,
   * no checkpoint, so the next start runs crash recovery), keeps it down for
   * `downMs`, and starts it again. Returns when it accepts connections.
   */
  crashRestart(downMs: number): Promise<{ downMs: number; startMs: number }>;
  stop(): Promise<void>;
}

export async function startServer(log: (line: string) => void): Promise<BenchServer> {
  const scratch = await createScratchPostgres({
    prefix: 'cyclone-bench-pg-',
    settings: SERVER_SETTINGS,
    persistent: false,
    onError: (message) => log(`[embedded postgres] ${message}`),
  });
  try {
    await scratch.server.start();
  } catch (err) {
    await scratch.destroy();
    throw err;
  }
  const host = '127.0.0.1';
  const urlFor = (database: string) => `postgres://postgres:postgres@${host}:${scratch.port}/${database}`;
  const admin = new pg.Client({ connectionString: urlFor('postgres') });
  await admin.connect();
  await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  await admin.end();
  return {
    adminUrl: urlFor('postgres'),
    host,
    port: scratch.port,
    user: 'postgres',
    password: 'postgres',
    dataDir: scratch.dataDir,
    urlFor,
    crashRestart: async (downMs) => {
      const pid = Number(readFileSync(join(scratch.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      const crashedAt = Date.now();
      process.kill(pid, 'SIGQUIT');
      while (isAlive(pid)) await new Promise((resolve) => setTimeout(resolve, 20));
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, downMs - (Date.now() - crashedAt))));
      const startingAt = Date.now();
      await scratch.server.start();
      return { downMs: startingAt - crashedAt, startMs: Date.now() - startingAt };
    },
    stop: scratch.destroy,
  };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export async function createDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
  // Each database gets the extension so a run can read its own statement statistics.
  const db = new pg.Client({ connectionString: adminUrl.replace(/\/[^/]*$/, `/${name}`) });
  await db.connect();
  try {
    await db.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  } finally {
    await db.end();
  }
}

export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

export async function serverSettings(adminUrl: string): Promise<Record<string, string>> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const names = [
      'server_version',
      'fsync',
      'synchronous_commit',
      'full_page_writes',
      'wal_sync_method',
      'max_connections',
      'shared_buffers',
      'max_wal_size',
      'checkpoint_timeout',
    ];
    const { rows } = await client.query('SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1)', [names]);
    const out: Record<string, string> = {};
    for (const r of rows) out[r.name] = r.unit && r.unit !== '' ? `${r.setting} (${r.unit})` : r.setting;
    const { rows: v } = await client.query('SHOW server_version');
    out.server_version = v[0].server_version;
    const { rows: sb } = await client.query('SHOW shared_buffers');
    out.shared_buffers = sb[0].shared_buffers;
    return out;
  } finally {
    await client.end();
  }
}
