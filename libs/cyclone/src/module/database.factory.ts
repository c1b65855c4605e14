import { Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type pg from 'pg';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { startEmbeddedDatabase, type EmbeddedDatabase } from '../database/embedded-database.js';
import { migrateOnStartup } from '../schema/migrator.js';
import { ENSURE_PARTITIONS, HAS_RUNS_TABLE } from '../sql/partitions.sql.js';

const logger = new Logger('Cyclone');

/**
 * Opens the database the options point at: a DataSource of the app's, a URL,
 * `CYCLONE_DATABASE_URL` / `DATABASE_URL`, or else an embedded PostgreSQL for
 * development. Then applies or verifies the migrations.
 */
export async function createCycloneDatabase(options: ResolvedOptions): Promise<CycloneDatabase> {
  const connection = options.connection;
  let database: CycloneDatabase;
  if (connection && 'dataSource' in connection) {
    const dataSource = connection.dataSource;
    if (!dataSource.isInitialized) await dataSource.initialize();
    database = new CycloneDatabase(dataSource, poolOf(dataSource), false);
  } else {
    let url = connection?.url ?? process.env.CYCLONE_DATABASE_URL ?? process.env.DATABASE_URL;
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
    }
    const dataSource = new DataSource({
      type: 'postgres',
      url,
      applicationName: 'cyclone',
      poolSize: options.poolSize,
      // Keepalives let a half-open connection (a network partition rather than
      // a refused one) fail instead of hanging a claim or heartbeat forever.
      extra: { keepAlive: true },
    });
    try {
      await dataSource.initialize();
    } catch (err) {
      await embedded?.stop();
      throw err;
    }
    database = new CycloneDatabase(dataSource, poolOf(dataSource), true, embedded);
  }
  try {
    for (const migration of await migrateOnStartup(database.pool, options.migrationsRun)) {
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

/** The `pg` pool TypeORM's PostgreSQL driver keeps as its master connection. */
function poolOf(dataSource: DataSource): pg.Pool {
  const pool = (dataSource.driver as unknown as { master?: pg.Pool }).master;
  if (!pool) {
    throw new Error(`Cyclone needs a PostgreSQL DataSource; got type "${dataSource.options.type}".`);
  }
  return pool;
}
