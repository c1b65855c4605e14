import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import pg from 'pg';
import type { EmbeddedDatabase } from './embedded-database.js';

/**
 * Cyclone's access to PostgreSQL. Runtime statements go straight to the `pg`
 * pool behind the TypeORM DataSource: the hot paths (claim, complete,
 * heartbeat) need neither entities nor a query runner per call.
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

  /**
   * Runs one statement on a pooled connection. A `name` makes it a prepared
   * statement, parsed and planned once per connection: for the hot paths
   * (claim, complete, enqueue, heartbeat), which run thousands of times.
   */
  async query<R extends pg.QueryResultRow = Record<string, any>>(
    text: string,
    values?: unknown[],
    name?: string,
  ): Promise<pg.QueryResult<R>> {
    return name ? this.pool.query<R>({ name, text, values }) : this.pool.query<R>(text, values);
  }

  /** Connection settings for a dedicated client, such as the LISTEN connection. */
  clientConfig(): pg.ClientConfig {
    return { ...(this.pool.options as pg.ClientConfig) };
  }

  /**
   * Closes what Cyclone opened. Runs after every `onModuleDestroy`, so workers
   * have drained and handed their steps back over a still-open pool.
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
