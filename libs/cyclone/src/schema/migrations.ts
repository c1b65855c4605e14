import type { MigrationInterface, QueryRunner } from 'typeorm';
import { readSql } from './sql-files.js';

/** One version of Cyclone's schema: a SQL file that records its own version when it runs. */
export interface SchemaMigration {
  readonly version: number;
  readonly name: string;
  /** The SQL it runs, includes expanded. */
  readonly up: string;
  readonly down: string;
}

/**
 * A migration as a TypeORM migration class, for apps that migrate with
 * TypeORM. The SQL records (or removes) its version in
 * `cyclone_schema_migrations` itself, so the record is right whichever tool
 * applied it, and Cyclone's own migrator skips what TypeORM applied.
 */
function sqlMigration(version: number, name: string, file: string) {
  return class implements MigrationInterface {
    static readonly version = version;
    static get up(): string {
      return readSql(`migrations/${file}.sql`);
    }
    static get down(): string {
      return readSql(`migrations/${file}.down.sql`);
    }
    readonly name = name;

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(readSql(`migrations/${file}.sql`));
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(readSql(`migrations/${file}.down.sql`));
    }
  };
}

export class CycloneBaseline1764403200000 extends sqlMigration(1, 'CycloneBaseline1764403200000', '0001-baseline') {}
export class CycloneStepBackoff1764835200000 extends sqlMigration(2, 'CycloneStepBackoff1764835200000', '0002-step-backoff') {}
export class CycloneObservability1764921600000 extends sqlMigration(
  3,
  'CycloneObservability1764921600000',
  '0003-observability',
) {}
export class CycloneDashboardIndexes1765008000000 extends sqlMigration(
  4,
  'CycloneDashboardIndexes1765008000000',
  '0004-dashboard-indexes',
) {}
export class CycloneFlowControl1765180800000 extends sqlMigration(5, 'CycloneFlowControl1765180800000', '0005-flow-control') {}
export class CycloneClaimPriorities1765267200000 extends sqlMigration(
  6,
  'CycloneClaimPriorities1765267200000',
  '0006-claim-priorities',
) {}
export class CyclonePartitionVacuum1765353600000 extends sqlMigration(
  7,
  'CyclonePartitionVacuum1765353600000',
  '0007-partition-vacuum',
) {}
export class CycloneClaimFloor1765440000000 extends sqlMigration(8, 'CycloneClaimFloor1765440000000', '0008-claim-floor') {}
export class CycloneRoutingMonths1765526400000 extends sqlMigration(
  9,
  'CycloneRoutingMonths1765526400000',
  '0009-routing-months',
) {}
export class CycloneKeepPausedWrites1765612800000 extends sqlMigration(
  10,
  'CycloneKeepPausedWrites1765612800000',
  '0010-keep-paused-writes',
) {}
export class CycloneQueues1765699200000 extends sqlMigration(11, 'CycloneQueues1765699200000', '0011-queues') {}
export class CycloneOperators1765785600000 extends sqlMigration(12, 'CycloneOperators1765785600000', '0012-operators') {}
export class CycloneCodeWorkflows1766044800000 extends sqlMigration(
  13,
  'CycloneCodeWorkflows1766044800000',
  '0013-code-workflows',
) {}
export class CycloneBrokerDispatch1766131200000 extends sqlMigration(
  14,
  'CycloneBrokerDispatch1766131200000',
  '0014-broker-dispatch',
) {}
export class CycloneLocalStart1766217600000 extends sqlMigration(15, 'CycloneLocalStart1766217600000', '0015-local-start') {}
export class CycloneLendAhead1766304000000 extends sqlMigration(
  16,
  'CycloneLendAhead1766304000000',
  '0016-lend-ahead',
) {}
export class CycloneRetentionZero1766390400000 extends sqlMigration(
  17,
  'CycloneRetentionZero1766390400000',
  '0017-retention-zero',
) {}
export class CycloneNoJit1766476800000 extends sqlMigration(18, 'CycloneNoJit1766476800000', '0018-no-jit') {}
export class CycloneClaimFloors1766563200000 extends sqlMigration(
  19,
  'CycloneClaimFloors1766563200000',
  '0019-claim-floors',
) {}
export class CycloneStartOnInsert1766649600000 extends sqlMigration(
  20,
  'CycloneStartOnInsert1766649600000',
  '0020-start-on-insert',
) {}
export class CycloneRecheckedCompletion1766736000000 extends sqlMigration(
  21,
  'CycloneRecheckedCompletion1766736000000',
  '0021-rechecked-completion',
) {}

/**
 * Cyclone's migrations in order. Add them to your own DataSource's
 * `migrations` to migrate with TypeORM, or let `CycloneModule` (or
 * `npx cyclone migrate`) apply them.
 */
export const CYCLONE_MIGRATIONS = [
  CycloneBaseline1764403200000,
  CycloneStepBackoff1764835200000,
  CycloneObservability1764921600000,
  CycloneDashboardIndexes1765008000000,
  CycloneFlowControl1765180800000,
  CycloneClaimPriorities1765267200000,
  CyclonePartitionVacuum1765353600000,
  CycloneClaimFloor1765440000000,
  CycloneRoutingMonths1765526400000,
  CycloneKeepPausedWrites1765612800000,
  CycloneQueues1765699200000,
  CycloneOperators1765785600000,
  CycloneCodeWorkflows1766044800000,
  CycloneBrokerDispatch1766131200000,
  CycloneLocalStart1766217600000,
  CycloneLendAhead1766304000000,
  CycloneRetentionZero1766390400000,
  CycloneNoJit1766476800000,
  CycloneClaimFloors1766563200000,
  CycloneStartOnInsert1766649600000,
  CycloneRecheckedCompletion1766736000000,
] as const;

/** The migrations as data: version, name and SQL. */
export function schemaMigrations(): SchemaMigration[] {
  return CYCLONE_MIGRATIONS.map((m) => ({ version: m.version, name: new m().name, up: m.up, down: m.down }));
}
