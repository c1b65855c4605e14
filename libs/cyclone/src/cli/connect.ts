import pg from 'pg';
import { CliError, EXIT_USAGE } from './cli-error.js';
import { describeUrl } from '../database/describe-url.js';

/** Where the URL came from, to say so when it does not work. */
export type UrlSource = '--url' | 'CYCLONE_DATABASE_URL' | 'DATABASE_URL';

/** How long to wait for the server before calling it unreachable. */
const CONNECT_TIMEOUT_MS = 10_000;

export function resolveUrl(flag: string | undefined): { url: string; source: UrlSource } {
  if (flag !== undefined) return { url: flag, source: '--url' };
  if (process.env.CYCLONE_DATABASE_URL) return { url: process.env.CYCLONE_DATABASE_URL, source: 'CYCLONE_DATABASE_URL' };
  if (process.env.DATABASE_URL) return { url: process.env.DATABASE_URL, source: 'DATABASE_URL' };
  throw new CliError('no database URL: pass --url postgres://… or set CYCLONE_DATABASE_URL (or DATABASE_URL)', EXIT_USAGE);
}

/** Opens one connection, turning every way that can fail into one line that says what to check. */
export async function connect(flag: string | undefined): Promise<pg.Client> {
  const { url, source } = resolveUrl(flag);
  let where: string;
  try {
    if (!/^postgres(ql)?:$/.test(new URL(url).protocol)) throw new Error('not a postgres: URL');
    where = describeUrl(url);
  } catch {
    throw new CliError(`the URL from ${source} is not a PostgreSQL URL such as postgres://user:password@host:5432/db`, EXIT_USAGE);
  }
  const client = new pg.Client({
    connectionString: url,
    application_name: 'cyclone-cli',
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
  });
  // A connection lost later is reported by the query that needed it.
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => undefined);
    throw new CliError(`cannot connect to PostgreSQL at ${where} (URL from ${source}): ${reason(err)}`);
  }
  return client;
}

function reason(err: unknown): string {
  const { code, message } = err as { code?: string; message?: string };
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused; is the server running on that host and port?';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'unknown host';
    case '28P01':
    case '28000':
      return 'authentication failed; check the user and password';
    case '3D000':
      return `${message}; create it first`;
    default:
      return message || String(err);
  }
}
