import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A TypeORM migration made of plain SQL. The SQL stays readable as one block
 * per migration, is exposed as static `up`/`down` for printing, and records
 * (or removes) its `version` in `cyclone_schema_migrations` itself, so the
 * record is right whichever tool applied it. The first migration creates that
 * table.
 */
export function sqlMigration(name: string, version: number, upSql: string, downSql: string) {
  const up = `${upSql.trimEnd()}

INSERT INTO cyclone_schema_migrations (version, name) VALUES (${version}, '${name}') ON CONFLICT DO NOTHING;
`;
  const down = `${downSql.trimEnd()}
DELETE FROM cyclone_schema_migrations WHERE version = ${version};
`;
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
