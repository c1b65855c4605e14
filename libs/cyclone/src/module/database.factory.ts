import { Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type pg from 'pg';
import { DatabaseUnavailableError } from '../errors/database-unavailable.error.js';
import { errorMessage } from '../common/error-message.js';
import { messages } from '../cyclone.messages.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { startEmbeddedDatabase, type EmbeddedDatabase } from '../database/embedded-database.js';
import { describeUrl } from '../database/describe-url.js';
import { WARM_CONNECTIONS } from '../database/connection-warmer.js';
import { migrateOnStartup } from '../schema/migrator.js';
import { ENSURE_PARTITIONS, HAS_RUNS_TABLE } from '../sql/partitions.sql.js';

const logger = new Logger('Cyclone');

/** Where the database came from, for the message when it cannot be reached. */
type Source = 'the connection option' | 'CYCLONE_DATABASE_URL' | 'DATABASE_URL' | 'the embedded server' | 'the DataSource given';

/**
 * Opens the database the options point at: a DataSource of the app's, a URL,
 * `CYCLONE_DATABASE_URL` / `DATABASE_URL`, or else an embedded PostgreSQL for
 * development. A server that cannot be reached yet is tried again, as
 * `connectRetry` says. Then applies or verifies the migrations.
 */
export async function createCycloneDatabase(options: ResolvedOptions): Promise<CycloneDatabase> {
  const connection = options.connection;
  let database: CycloneDatabase;
  if (connection && 'dataSource' in connection) {
    const dataSource = connection.dataSource;
    if (!dataSource.isInitialized) {
      await withRetry(options, describeDataSource(dataSource), 'the DataSource given', () => dataSource.initialize());
    }
    database = new CycloneDatabase(dataSource, poolOf(dataSource), false);
  } else {
    const [configured, source] = configuredUrl(options);
    let url = configured;
    let embedded: EmbeddedDatabase | undefined;
    if (!url) {
      const dir = process.env.CYCLONE_EMBEDDED_DIR ?? '.cyclone/pgdata';
      const port = Number(process.env.CYCLONE_EMBEDDED_PORT ?? 54329);
      logger.warn(
        `No database configured: starting an embedded PostgreSQL on port ${port} with data in ${dir}. ` +
          'This is a development default; set CYCLONE_DATABASE_URL or the connection option for anything else.',
      );
      embedded = await startEmbeddedDatabase({ dir, port, logger });
      url = embedded.url;
      logger.log(messages.embeddedReady(url));
    }
    const statementTimeoutMs = options.statementTimeoutMs;
    let dataSource: DataSource | undefined;
    try {
      dataSource = await withRetry(options, describeUrl(url), source, async () => {
        const attempt = new DataSource({
          type: 'postgres',
          url,
          applicationName: 'cyclone',
          poolSize: options.poolSize,
          // A call waits at most this long for a connection: for a free one
          // of the pool, or for a server that does not answer at all.
          ...(statementTimeoutMs > 0 ? { connectTimeoutMS: statementTimeoutMs } : {}),
          extra: {
            // Keepalives let a half-open connection (a network partition rather than
            // a refused one) fail instead of hanging a claim or heartbeat forever.
            keepAlive: true,
            // The connections warmed at startup stay open through quiet spells
            // (pg closes an idle one after 10 s): a new one pays the first
            // call of each statement again (connection-warmer.ts).
            min: WARM_CONNECTIONS,
            // A statement stuck behind a lock is cancelled rather than held forever.
            ...(statementTimeoutMs > 0 ? { statement_timeout: statementTimeoutMs } : {}),
          },
        });
        await attempt.initialize();
        return attempt;
      });
    } catch (err) {
      await embedded?.stop();
      throw err;
    }
    database = new CycloneDatabase(dataSource, poolOf(dataSource), true, embedded, statementTimeoutMs);
  }
  try {
    const onRetry = (migration: string, attempt: number) => {
      if (attempt === 1 || attempt % 10 === 0) logger.warn(messages.migrationWaiting(migration, attempt));
    };
    for (const migration of await migrateOnStartup(database, options.migrationsRun, { onRetry })) {
      logger.log(`Applied migration ${migration.name}`);
    }
    // Runs need their month's partition before the first insert. Without
    // migrations Cyclone leaves an absent schema alone.
    if (options.migrationsRun !== false || (await database.query(HAS_RUNS_TABLE, [])).rows[0].present) {
      await database.query(ENSURE_PARTITIONS, [options.partitionMonthsAhead]);
    }
  } catch (err) {
    await database.onApplicationShutdown();
    throw err;
  }
  return database;
}

function configuredUrl(options: ResolvedOptions): [string | undefined, Source] {
  const connection = options.connection as { url?: string } | undefined;
  if (connection?.url) return [connection.url, 'the connection option'];
  if (process.env.CYCLONE_DATABASE_URL) return [process.env.CYCLONE_DATABASE_URL, 'CYCLONE_DATABASE_URL'];
  if (process.env.DATABASE_URL) return [process.env.DATABASE_URL, 'DATABASE_URL'];
  return [undefined, 'the embedded server'];
}

/**
 * Runs `connect` until it succeeds or `connectRetry.attempts` have failed,
 * `connectRetry.delay` apart, logging each failure; then fails with
 * DatabaseUnavailableError naming the server and where its URL came from.
 */
async function withRetry<T>(options: ResolvedOptions, where: string, source: Source, connect: () => Promise<T>): Promise<T> {
  const { attempts, delayMs } = options.connectRetry;
  for (let attempt = 1; ; attempt++) {
    try {
      return await connect();
    } catch (err) {
      const reason = connectFailure(err);
      if (attempt >= attempts) {
        throw new DatabaseUnavailableError(
          messages.connectFailed(where, source, reason, attempts, delayMs),
          (err as { code?: unknown })?.code as string | undefined,
          err,
        );
      }
      logger.warn(messages.connectRetrying(where, source, reason, attempt, attempts, delayMs));
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  }
}

/** The server's or the network's words, which never hold the password. */
function connectFailure(err: unknown): string {
  const reason = errorMessage(err);
  // An error of a connection refused on every address (IPv6, IPv4) has no message of its own.
  const inner = (err as { errors?: unknown[] } | null)?.errors;
  if (reason === 'AggregateError' && Array.isArray(inner) && inner.length > 0) return inner.map(errorMessage).join('; ');
  return reason;
}

function describeDataSource(dataSource: DataSource): string {
  const o = dataSource.options as { host?: string; port?: number; database?: string; url?: string };
  if (o.url) return describeUrl(o.url);
  return `${o.host ?? 'localhost'}:${o.port ?? 5432}/${o.database ?? ''}`;
}

/** The `pg` pool TypeORM's PostgreSQL driver keeps as its master connection. */
function poolOf(dataSource: DataSource): pg.Pool {
  const pool = (dataSource.driver as unknown as { master?: pg.Pool }).master;
  if (!pool) {
    throw new Error(`Cyclone needs a PostgreSQL DataSource; got type "${dataSource.options.type}".`);
  }
  return pool;
}
