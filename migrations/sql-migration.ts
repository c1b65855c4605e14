import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A TypeORM migration made of plain SQL. The SQL stays readable as one block
 * per migration, is exposed as static `up`/`down` for printing, and `version`
 * is what `cyclone_schema_migrations` records, whichever tool applied it.
 */
export function sqlMigration(name: string, version: number, up: string, down: string) {
  return class implements MigrationInterface {
    static readonly version = version;
    static readonly up = up;
    static readonly down = down;
    readonly name = name;

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(up);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(down);
    }
  };
}
