import { describe, it, expect, afterEach } from '@jest/globals';
import { Injectable, Module } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  CYCLONE_MIGRATIONS,
  CycloneClient,
  CycloneModule,
  SchemaError,
  Step,
  type CycloneModuleOptions,
} from 'cyclone-nestjs';
import { AppHarness, CapturingLogger } from './support/nest-app-harness.js';
import { waitFor } from './support/wait.js';
import { sql } from './support/sql.js';

const harness = new AppHarness();
afterEach(() => harness.cleanup());

const CYCLONE_TABLES = ['cyclone_schema_migrations', 'cyclone_runs', 'cyclone_steps'];

@Injectable()
class EchoSteps {
  @Step('echo')
  async echo(input: unknown) {
    return input;
  }
}

function appModule(url: string, options: Partial<CycloneModuleOptions> = {}) {
  @Module({
    imports: [CycloneModule.forRoot({ connection: { url }, pollInterval: [50, 200], ...options })],
    providers: [EchoSteps],
  })
  class AppModule {}
  return AppModule;
}

async function existingTables(url: string): Promise<string[]> {
  const rows = await sql<{ name: string }>(
    url,
    `SELECT t AS name FROM unnest($1::text[]) AS t WHERE to_regclass(t) IS NOT NULL ORDER BY t`,
    [CYCLONE_TABLES],
  );
  return rows.map((r) => r.name);
}

async function appliedVersions(url: string): Promise<number[]> {
  const rows = await sql<{ version: number }>(url, 'SELECT version FROM cyclone_schema_migrations ORDER BY version');
  return rows.map((r) => r.version);
}

/** Connections Cyclone's own pool holds on a database. */
async function cycloneConnections(url: string): Promise<number> {
  const [{ n }] = await sql(
    url,
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name IN ('cyclone', 'cyclone-listener')`,
  );
  return n;
}


const ALL_VERSIONS = CYCLONE_MIGRATIONS.map((m) => m.version);

describe('migrationsRun', () => {
  it('true (the default) applies the schema to an empty database and records every version', async () => {
    const db = await harness.database();
    expect(await existingTables(db.url)).toEqual([]);

    const app = await harness.start(appModule(db.url));
    expect(await existingTables(db.url)).toEqual([...CYCLONE_TABLES].sort());
    expect(await appliedVersions(db.url)).toEqual(ALL_VERSIONS);
    // Versions count up from 1 in the order the migrations run (a version
    // may be held for a branch not merged yet, so they need not be consecutive).
    expect(ALL_VERSIONS[0]).toBe(1);
    expect(ALL_VERSIONS).toEqual([...ALL_VERSIONS].sort((a, b) => a - b));
    expect(new Set(ALL_VERSIONS).size).toBe(ALL_VERSIONS.length);

    const client = app.get(CycloneClient);
    const runId = await client.enqueue('echo', { ok: true });
    await expect(client.result(runId, { timeout: 10_000 })).resolves.toEqual({ ok: true });
  });

  it('true on an already migrated database applies nothing again', async () => {
    const db = await harness.database();
    await harness.close(await harness.start(appModule(db.url)));
    const query = 'SELECT version, applied_at FROM cyclone_schema_migrations ORDER BY version';
    const first = await sql(db.url, query);
    expect(first).toHaveLength(ALL_VERSIONS.length);

    await harness.start(appModule(db.url, { migrationsRun: true }));
    expect(await sql(db.url, query)).toEqual(first);
  });

  it("'verify' on an empty database fails startup with SchemaError and leaves no connection behind", async () => {
    const db = await harness.database();
    const err = await harness.start(appModule(db.url, { migrationsRun: 'verify' }), false).catch((e: Error) => e);
    expect(err).toBeInstanceOf(SchemaError);
    expect((err as SchemaError).code).toBe('schema');
    // Says what is missing and how to fix it.
    expect((err as Error).message).toContain('1');
    expect((err as Error).message).toContain('migrationsRun');
    // Verify created nothing.
    expect(await existingTables(db.url)).toEqual([]);
    await waitFor('the failed app to close its connections', async () => (await cycloneConnections(db.url)) === 0, 5_000);
  });

  it("'verify' on a migrated database starts and runs jobs", async () => {
    const db = await harness.database();
    await harness.close(await harness.start(appModule(db.url)));

    const app = await harness.start(appModule(db.url, { migrationsRun: 'verify' }));
    const runId = await app.get(CycloneClient).enqueue('echo', 'verified');
    await expect(app.get(CycloneClient).result(runId, { timeout: 10_000 })).resolves.toBe('verified');
  });

  it('false does nothing to the database', async () => {
    const db = await harness.database();
    await harness.start(appModule(db.url, { migrationsRun: false, runWorkers: false }));
    expect(await existingTables(db.url)).toEqual([]);
  });

  it('four apps starting at the same moment on an empty database all start; the schema is applied once', async () => {
    const db = await harness.database();
    const logger = new CapturingLogger();
    const starts = await Promise.allSettled(
      [1, 2, 3, 4].map(() => harness.start(appModule(db.url), logger)),
    );
    expect(starts.filter((s) => s.status === 'rejected')).toEqual([]);
    expect(await appliedVersions(db.url)).toEqual(ALL_VERSIONS);
    expect(logger.messages.filter((m) => m.startsWith('Applied migration'))).toHaveLength(ALL_VERSIONS.length);

    // Each of them works against the one schema.
    for (const start of starts) {
      const client = (start as PromiseFulfilledResult<Awaited<ReturnType<typeof harness.start>>>).value.get(CycloneClient);
      const runId = await client.enqueue('echo', 'shared');
      await expect(client.result(runId, { timeout: 10_000 })).resolves.toBe('shared');
    }
  });
});

describe('a database migrated by another version', () => {
  it('fails startup, in every mode that reads the schema, naming the versions it does not know', async () => {
    const db = await harness.database();
    await harness.close(await harness.start(appModule(db.url)));
    await sql(db.url, "INSERT INTO cyclone_schema_migrations (version, name) VALUES (99, 'CycloneFromTheFuture')");
    for (const migrationsRun of [true, 'verify'] as const) {
      const err = await harness.start(appModule(db.url, { migrationsRun }), false).catch((e: Error) => e);
      expect(err).toBeInstanceOf(SchemaError);
      expect((err as Error).message).toContain('(99)');
      expect((err as Error).message).toContain('another version migrated it');
    }
  });
});

describe('CYCLONE_MIGRATIONS in a TypeORM DataSource', () => {
  it("runs with dataSource.runMigrations(), after which 'verify' starts; undoing them makes 'verify' fail again", async () => {
    const db = await harness.database();
    const dataSource = new DataSource({ type: 'postgres', url: db.url, migrations: [...CYCLONE_MIGRATIONS] });
    await dataSource.initialize();
    harness.defer(async () => {
      if (dataSource.isInitialized) await dataSource.destroy();
    });

    const ran = await dataSource.runMigrations();
    expect(ran.map((m) => m.name)).toEqual(CYCLONE_MIGRATIONS.map((m) => m.name));
    expect(await appliedVersions(db.url)).toEqual(ALL_VERSIONS);
    expect(await existingTables(db.url)).toEqual([...CYCLONE_TABLES].sort());
    // TypeORM has nothing left to run.
    expect(await dataSource.showMigrations()).toBe(false);

    const app = await harness.start(appModule(db.url, { migrationsRun: 'verify' }));
    const runId = await app.get(CycloneClient).enqueue('echo', 'typeorm');
    await expect(app.get(CycloneClient).result(runId, { timeout: 10_000 })).resolves.toBe('typeorm');
    await harness.close(app);

    // An app that applies migrations itself sees them applied and does nothing.
    await harness.close(await harness.start(appModule(db.url, { migrationsRun: true })));
    expect(await appliedVersions(db.url)).toEqual(ALL_VERSIONS);

    // Undoing every migration removes every table and function but the record of versions, and the records with them.
    for (const _ of ALL_VERSIONS) await dataSource.undoLastMigration();
    expect(await appliedVersions(db.url)).toEqual([]);
    expect(await existingTables(db.url)).toEqual(['cyclone_schema_migrations']);
    const functions = await sql(db.url, "SELECT proname FROM pg_proc WHERE proname LIKE 'cyclone\\_%'");
    expect(functions).toEqual([]);
    await expect(harness.start(appModule(db.url, { migrationsRun: 'verify' }), false)).rejects.toBeInstanceOf(SchemaError);
  });
});
