import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import type pg from 'pg';
import { DatabaseUnavailableError } from '../errors/database-unavailable.error.js';
import { messages } from '../cyclone.messages.js';
import type { EmbeddedDatabase } from './embedded-database.js';
import { isConnectionLost, isUnreachable } from './database-fault.js';
import { describeUrl } from './describe-url.js';
import { OutageLog } from './outage-log.js';
import { execute, type Statement } from './statement.js';

/**
 * Cyclone's access to PostgreSQL. Runtime statements go straight to the `pg`
 * pool behind the TypeORM DataSource: the hot paths (claim, complete,
 * heartbeat) need neither entities nor a query runner per call.
 * `dataSource` is the app's own when it gave one, else the one Cyclone
 * opened, for the app's transactions with `enqueueTx`.
 */
export class CycloneDatabase implements OnApplicationShutdown {
  private readonly logger = new Logger('Cyclone');

  /** host:port/database of the server, for messages; never the password. */
  readonly where: string;
  private readonly outage: OutageLog;

  constructor(
    readonly dataSource: DataSource,
    readonly pool: pg.Pool,
    /** True when Cyclone created the DataSource and so must close it. */
    private readonly owned: boolean,
    private readonly embedded?: EmbeddedDatabase,
    /** The statement_timeout Cyclone set on its connections, in ms; null when the connections are the app's. */
    readonly statementTimeoutMs: number | null = null,
  ) {
    const options = pool.options as pg.PoolConfig;
    this.where = options.connectionString
      ? describeUrl(options.connectionString)
      : `${options.host ?? 'localhost'}:${options.port ?? 5432}/${options.database ?? ''}`;
    this.outage = new OutageLog(this.where, this.logger);
    // pg raises a client's 'error' with no listener as an uncaught exception.
    // The pool listens while a connection is idle and its borrower once it
    // holds it, but one TCP read can carry a new connection's readiness and
    // the server's 57P01 at shutdown together: the error then comes before the
    // borrower's listener. Heard here, it is the outage it is; the connection
    // is unusable, so its next query fails and the pool drops it.
    pool.on('connect', (client) => client.on('error', (err) => this.outage.failed(err.message)));
  }

  /**
   * Whether `err` is the outage the log already tells of: a caller that met
   * it leaves its own warning out, so an outage is not a warning from every
   * claim, loop and heartbeat several times a second.
   */
  covers(err: unknown): boolean {
    return this.outage.isDown && isUnreachable(err);
  }

  /**
   * Runs one statement on a pooled connection, as `pool.query` does, but in
   * two steps, because a caller needs to know which one failed: a connection
   * that cannot be had means nothing was sent (DatabaseUnavailableError
   * here), while a connection lost during the statement may have committed
   * it (the raw error, for the caller to judge). A connection that broke is
   * destroyed; one that only returned an error goes back to the pool.
   */
  async query<P extends readonly unknown[], R extends pg.QueryResultRow>(
    stmt: Statement<P, R>,
    params: P,
  ): Promise<pg.QueryResult<R>> {
    return this.withConnection((client) => execute(client, stmt, params));
  }

  /**
   * Runs `work` in a transaction of its own on a pooled connection: COMMIT
   * when it resolves, ROLLBACK when it throws (its error is what the caller
   * gets). A connection that broke is destroyed, as in `query`.
   */
  async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return this.withConnection(async (client) => {
      await client.query('BEGIN');
      let result: T;
      try {
        result = await work(client);
      } catch (err) {
        // A rollback that fails too (the connection is gone) says nothing the first error does not.
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
      await client.query('COMMIT');
      return result;
    });
  }

  /**
   * Lends `use` a pooled connection; one that broke under it is destroyed
   * rather than returned. Hold a connection only through this: a checked-out
   * connection has no listener of the pool's, and one that the server ends
   * while it sits idle (a restart, pg_terminate_backend: 57P01) emits an
   * 'error' that would otherwise crash the process.
   */
  async withConnection<T>(use: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const began = Date.now();
    const client = await this.connect();
    let released = false;
    const release = (err?: Error) => {
      if (released) return;
      released = true;
      client.removeListener('error', release);
      client.release(err);
    };
    // A checked-out client emits 'error' when its connection breaks; it must not go unheard.
    client.once('error', release);
    try {
      const result = await use(client);
      release();
      this.outage.succeeded(began);
      return result;
    } catch (err) {
      const lost = isConnectionLost(err);
      release(lost ? (err as Error) : undefined);
      if (lost) this.outage.failed((err as Error).message);
      else this.outage.succeeded(began);
      throw err;
    }
  }

  /** A pooled connection, or DatabaseUnavailableError: the server cannot be reached, or the pool is closed. */
  async connect(): Promise<pg.PoolClient> {
    try {
      return await this.pool.connect();
    } catch (err) {
      const { message, code } = err as { message?: unknown; code?: unknown };
      const reason = typeof message === 'string' && message !== '' ? message : `the connection failed${typeof code === 'string' ? ` (${code})` : ''}`;
      // A pool closed at shutdown is not an outage.
      if (!this.pool.ending) this.outage.failed(reason);
      throw new DatabaseUnavailableError(
        messages.databaseUnavailable(this.where, reason),
        typeof code === 'string' ? code : undefined,
        err,
      );
    }
  }

  /** Connection settings for a dedicated client, such as the LISTEN connection. */
  clientConfig(): pg.ClientConfig {
    return { ...(this.pool.options as pg.ClientConfig) };
  }

  /**
   * Closes what Cyclone opened. Runs after every `onModuleDestroy`, so workers
   * have drained and handed their steps back over a still-open pool, and only
   * then does an embedded server stop.
   */
  async onApplicationShutdown(): Promise<void> {
    if (!this.owned) return;
    if (this.dataSource.isInitialized) await this.dataSource.destroy();
    if (this.embedded) {
      await this.embedded.stop();
      this.logger.log('Embedded PostgreSQL stopped');
    }
  }
}
