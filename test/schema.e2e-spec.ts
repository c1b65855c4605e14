import { describe, it, expect, afterAll, beforeAll } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { RUN_STATES, STEP_STATES, NODE_TYPES, ERROR_KINDS } from 'cyclone-nestjs';
import { CHANNELS } from '../libs/cyclone/src/sql/names.js';
import { TestDatabase } from 'cyclone-nestjs/testing';
import { applyMigrations } from '../libs/cyclone/src/schema/migrator.js';
import { dumpSchema } from './support/schema-dump.js';
import { testServerUrl } from './support/nest-app-harness.js';

const PACKAGE = new URL('../libs/cyclone/', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, PACKAGE), 'utf8');
const functionFiles = readdirSync(new URL('sql/functions/', PACKAGE)).filter((f) => f.endsWith('.sql'));

/** A client on a database of its own, dropped after the file. */
async function freshDatabase(): Promise<{ client: pg.Client; database: TestDatabase }> {
  const database = await TestDatabase.create(testServerUrl());
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  return { client, database };
}

describe("the engine's SQL in one place", () => {
  let migrated: { client: pg.Client; database: TestDatabase };
  beforeAll(async () => {
    migrated = await freshDatabase();
    await applyMigrations(migrated.client);
  });
  afterAll(async () => {
    await migrated.client.end();
    await migrated.database.drop();
  });

  it('sql/schema.sql is what the migrations create (regenerate it with `npm run schema:write`)', async () => {
    expect(await dumpSchema(migrated.client)).toBe(read('sql/schema.sql'));
  });

  it('sql/schema.sql run on its own makes the same schema, recorded as migrated', async () => {
    const fresh = await freshDatabase();
    try {
      await fresh.client.query(read('sql/schema.sql'));
      expect(await dumpSchema(fresh.client)).toBe(read('sql/schema.sql'));
      await expect(applyMigrations(fresh.client)).resolves.toEqual([]);
    } finally {
      await fresh.client.end();
      await fresh.database.drop();
    }
  });

  it('each function is defined once, in its own file, and the migrations only include those files', async () => {
    const defined = functionFiles.flatMap((file) =>
      [...read(`sql/functions/${file}`).matchAll(/CREATE OR REPLACE FUNCTION (\w+)\(/g)].map((m) => m[1]),
    );
    expect(new Set(defined).size).toBe(defined.length);
    const { rows } = await migrated.client.query<{ name: string }>(
      `SELECT proname AS name FROM pg_proc WHERE proname LIKE 'cyclone\\_%' AND pronamespace = current_schema()::regnamespace`,
    );
    expect(new Set(rows.map((r) => r.name))).toEqual(new Set(defined));
    // A down may restate the body it restores: the function's file holds only the live one.
    for (const migration of readdirSync(new URL('migrations/', PACKAGE)).filter((m) => !m.endsWith('.down.sql'))) {
      expect(read(`migrations/${migration}`)).not.toMatch(/CREATE (OR REPLACE )?FUNCTION/);
    }
  });

  it('a function that turns a planner method off turns JIT off too (PostgreSQL 17 and earlier priced the disabled method past jit_above_cost)', async () => {
    const { rows } = await migrated.client.query<{ name: string; settings: string[] }>(
      `SELECT proname AS name, proconfig AS settings FROM pg_proc
        WHERE proname LIKE 'cyclone\\_%' AND pronamespace = current_schema()::regnamespace
          AND EXISTS (SELECT 1 FROM unnest(proconfig) s WHERE s LIKE 'enable\\_%=off')`,
    );
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.filter((r) => !r.settings.includes('jit=off')).map((r) => r.name)).toEqual([]);
  });

  it("the schema's states, node types and error kinds are the ones the code names", async () => {
    const { rows } = await migrated.client.query<{ name: string; definition: string }>(
      `SELECT conname AS name, pg_get_constraintdef(oid) AS definition FROM pg_constraint
        WHERE conname IN ('cyclone_runs_state_check', 'cyclone_steps_state_check',
                          'cyclone_steps_node_type_check', 'cyclone_steps_error_kind_check')`,
    );
    const values = (name: string) =>
      [...rows.find((r) => r.name === name)!.definition.matchAll(/'([a-z_]+)'::text/g)].map((m) => m[1]);
    expect(values('cyclone_runs_state_check')).toEqual([...RUN_STATES]);
    expect(values('cyclone_steps_state_check')).toEqual([...STEP_STATES]);
    expect(values('cyclone_steps_node_type_check')).toEqual([...NODE_TYPES]);
    expect(values('cyclone_steps_error_kind_check')).toEqual([...ERROR_KINDS]);
  });

  it('the SQL notifies only on the channels the code listens to', () => {
    const sources = [
      ...functionFiles.map((file) => read(`sql/functions/${file}`)),
      ...readdirSync(new URL('src/sql/', PACKAGE)).map((file) => read(`src/sql/${file}`)),
    ];
    const channels = new Set(sources.flatMap((text) => [...text.matchAll(/pg_notify\('([a-z_]+)'/g)].map((m) => m[1])));
    expect(channels).toEqual(new Set(CHANNELS));
  });
});
