// Writes libs/cyclone/sql/schema.sql from a database migrated from scratch by
// the package's own CLI: `npm run schema:write` (uses CYCLONE_TEST_DATABASE_URL,
// else an embedded server).
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { TestDatabase, startTestServer } from 'cyclone-nestjs/testing';
import { dumpSchema } from './schema-dump.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const server = process.env.CYCLONE_TEST_DATABASE_URL ? undefined : await startTestServer();
const database = await TestDatabase.create(process.env.CYCLONE_TEST_DATABASE_URL ?? server!.url);
const client = new pg.Client({ connectionString: database.url });
try {
  execFileSync(process.execPath, ['libs/cyclone/dist/cli/bin.js', 'migrate', '--url', database.url], { cwd: root });
  await client.connect();
  writeFileSync(`${root}libs/cyclone/sql/schema.sql`, await dumpSchema(client));
  process.stdout.write('Wrote libs/cyclone/sql/schema.sql\n');
} finally {
  await client.end();
  await database.drop();
  await server?.stop();
}
