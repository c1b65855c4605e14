import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The example app's own tables: its users, and their orders. Cyclone's
 * tables come from the package's migrations, which CycloneModule applies;
 * these are the app's business, applied by the app at start (see
 * src/database/app-migrations.ts).
 */
export class UsersAndOrders1765800000000 implements MigrationInterface {
  readonly name = 'UsersAndOrders1765800000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE users (
        id         serial PRIMARY KEY,
        email      text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`
      CREATE TABLE orders (
        id          serial PRIMARY KEY,
        user_id     integer NOT NULL REFERENCES users (id),
        total_cents integer NOT NULL CHECK (total_cents >= 0),
        created_at  timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`CREATE INDEX orders_created_at ON orders (created_at)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE orders`);
    await queryRunner.query(`DROP TABLE users`);
  }
}
