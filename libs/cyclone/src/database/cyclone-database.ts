import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import type pg from 'pg';
import type { EmbeddedDatabase } from './embedded-database.js';
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

  constructor(
    readonly dataSource: DataSource,
    readonly pool: pg.Pool,
    /** True when Cyclone created the DataSource and so must close it. */
    private readonly owned: boolean,
    private readonly embedded?: EmbeddedDatabase,
  ) {}

  /** Runs one statement on a pooled connection. */
  query<P extends readonly unknown[], R extends pg.QueryResultRow>(
    stmt: Statement<P, R>,
    params: P,
  ): Promise<pg.QueryResult<R>> {
    return execute(this.pool, stmt, params);
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
