import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { CycloneDatabase } from 'cyclone-nestjs';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { UsersAndOrders1765800000000 } from '../../migrations/1765800000000-users-and-orders.js';

/** The app's own migrations, in order (files in migrations/ at the repository's top). */
export const APP_MIGRATIONS = [UsersAndOrders1765800000000];

/** Replicas that start together take turns: only one applies a migration. */
const MIGRATION_LOCK = 'example app migrations';

/**
 * Applies the app's migrations at start, as a TypeORM app does with
 * `migrationsRun`, on the database Cyclone opened (the embedded server when
 * no URL is set). Cyclone's own migrations stay in the package and are
 * applied by CycloneModule first; these create the app's tables. They run
 * on a DataSource of their own that lists them, under an advisory lock.
 */
@Injectable()
export class AppMigrations implements OnModuleInit {
  private readonly logger = new Logger('Migrations');

  constructor(private readonly database: CycloneDatabase) {}

  async onModuleInit(): Promise<void> {
    const lock = await this.database.pool.connect();
    const migrator = new DataSource({
      ...(this.database.dataSource.options as DataSourceOptions),
      migrations: APP_MIGRATIONS,
      migrationsTableName: 'app_migrations',
      poolSize: 1,
    } as DataSourceOptions);
    try {
      await lock.query('SELECT pg_advisory_lock(hashtext($1))', [MIGRATION_LOCK]);
      await migrator.initialize();
      for (const migration of await migrator.runMigrations({ transaction: 'each' })) {
        this.logger.log(`Applied ${migration.name}`);
      }
    } finally {
      if (migrator.isInitialized) await migrator.destroy();
      await lock.query('SELECT pg_advisory_unlock(hashtext($1))', [MIGRATION_LOCK]).catch(() => undefined);
      lock.release();
    }
  }
}
