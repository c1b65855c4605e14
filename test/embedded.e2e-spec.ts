import { describe, it, expect, beforeAll, afterAll, jest } from '@jest/globals';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Injectable, Logger, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { CycloneModule, EmbeddedDatabaseError, Step } from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { startEmbeddedDatabase, type EmbeddedDatabase } from '../libs/cyclone/src/database/embedded-database.js';
import { freePort } from './support/scratch-postgres.js';
import { waitFor } from './support/wait.js';

/**
 * The embedded PostgreSQL that Cyclone starts when no database is configured:
 * its failures in its own words, and its place in the shutdown order (after
 * the workers' drain), with real processes and signals.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const APP = join(ROOT, '.build/test/embedded/embedded-app.js');
const logger = new Logger('embedded-test');

let dir: string;
let dataDir: string;
const children: ChildProcess[] = [];

beforeAll(() => {
  // As root the server runs as the postgres user, who must be able to write here.
  dir = mkdtempSync(join(tmpdir(), 'cyclone-embedded-'));
  chmodSync(dir, 0o777);
  dataDir = join(dir, 'pgdata');
});

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

interface AppProcess {
  child: ChildProcess;
  output: () => string;
  event: (name: string) => Promise<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * The example of an app on the embedded server, as its own process; with
 * `group`, the leader of a process group of its own, as a terminal runs its
 * foreground job, so that a signal to the group reaches everything it started.
 */
function startApp(port: number, env: Record<string, string> = {}, group = false): AppProcess {
  const child = spawn(process.execPath, [APP], {
    cwd: ROOT,
    env: { ...process.env, CYCLONE_DATABASE_URL: '', DATABASE_URL: '', CYCLONE_EMBEDDED_DIR: dataDir, CYCLONE_EMBEDDED_PORT: String(port), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: group,
  });
  children.push(child);
  let output = '';
  const events: Record<string, unknown>[] = [];
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    for (const line of chunk.toString().split('\n')) if (line.startsWith('{')) events.push(JSON.parse(line));
  });
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    output: () => output,
    event: (name) => waitFor(`the app's "${name}" (output so far:\n${output})`, () => events.find((e) => e.event === name), 60_000),
    exited,
  };
}

/** Whether a process is there and has not ended (a zombie, not yet reaped by its parent, has). */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
}

/** Opens the data directory with a server of the test's own and runs one query. */
async function inDatabase<R extends pg.QueryResultRow>(port: number, text: string, values: unknown[]): Promise<R[]> {
  const server = await startEmbeddedDatabase({ dir: dataDir, port, logger });
  const client = new pg.Client({ connectionString: server.url });
  try {
    await client.connect();
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
    await server.stop();
  }
}

describe('the embedded PostgreSQL', () => {
  it('on SIGTERM with shutdown hooks, the running step finishes before the server stops', async () => {
    const port = await freePort();
    const app = startApp(port, { EMBEDDED_SHUTDOWN_HOOKS: '1', EMBEDDED_STEP_MS: '1500' });
    const { runId } = await app.event('started');
    app.child.kill('SIGTERM');
    const exit = await app.exited;
    expect(exit.code === 0 || exit.signal === 'SIGTERM').toBe(true);
    expect(app.output()).not.toContain('handed back');
    const drained = app.output().indexOf('running step(s)');
    const stopped = app.output().indexOf('Embedded PostgreSQL stopped');
    expect(drained).toBeGreaterThan(-1);
    expect(stopped).toBeGreaterThan(drained);
    // The step's completion was written before the server went away.
    const steps = await inDatabase<{ state: string; output: unknown }>(
      port,
      'SELECT state, output FROM cyclone_steps WHERE run_id = $1',
      [runId],
    );
    expect(steps).toEqual([{ state: 'completed', output: { slept: 1500 } }]);
  }, 120_000);

  it.each(['SIGINT', 'SIGTERM', 'SIGHUP'] as const)(
    'on %s to the whole process group (Ctrl-C, or the terminal closing), the server outlives the drain and the running step’s outcome is recorded',
    async (signal) => {
      const port = await freePort();
      const app = startApp(port, { EMBEDDED_SHUTDOWN_HOOKS: '1', EMBEDDED_STEP_MS: '1500' }, true);
      const { runId } = await app.event('started');
      process.kill(-app.child.pid!, signal);
      const exit = await app.exited;
      expect(exit.code === 0 || exit.signal === signal).toBe(true);
      expect(app.output()).not.toContain('Could not record the outcome');
      expect(app.output().indexOf('Embedded PostgreSQL stopped')).toBeGreaterThan(app.output().indexOf('running step(s)'));
      // Completed with its output, no lease left to wait out.
      const steps = await inDatabase<{ state: string; output: unknown; lease_expiry: Date | null }>(
        port,
        'SELECT state, output, lease_expiry FROM cyclone_steps WHERE run_id = $1',
        [runId],
      );
      expect(steps).toEqual([{ state: 'completed', output: { slept: 1500 }, lease_expiry: null }]);
    },
    120_000,
  );

  it('prints the server’s URL at start, and the CLI can use it', async () => {
    const port = await freePort();
    const app = startApp(port, { EMBEDDED_SHUTDOWN_HOOKS: '1', EMBEDDED_STEP_MS: '1' });
    await app.event('ready');
    const url = `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
    expect(app.output()).toContain(`Embedded PostgreSQL ready at ${url} (its fixed development login, not a secret)`);
    const status = spawnSync(process.execPath, [join(ROOT, 'libs/cyclone/bin/cyclone.js'), 'status', '--url', url], { encoding: 'utf8' });
    expect(status.stderr).toBe('');
    expect(status.status).toBe(0);
    expect(status.stdout).toMatch(/^Migrations: applied 1, 2, /);
    app.child.kill('SIGTERM');
    await app.exited;
  }, 120_000);

  it('after the app is killed with SIGKILL, the server it leaves behind does not block the next start: it is stopped, even with a client connected', async () => {
    const port = await freePort();
    const first = startApp(port, { EMBEDDED_SHUTDOWN_HOOKS: '1', EMBEDDED_STEP_MS: '1' });
    await first.event('ready');
    const orphan = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    // A client of its own, as a psql left open would be: a plain SIGTERM would wait for it forever.
    const client = new pg.Client({ connectionString: `postgres://postgres:postgres@127.0.0.1:${port}/postgres` });
    const clientEnded = new Promise<void>((resolve) => client.once('end', resolve));
    client.on('error', () => undefined);
    await client.connect();
    first.child.kill('SIGKILL');
    await first.exited;
    expect(isRunning(orphan)).toBe(true);

    const second = startApp(port, { EMBEDDED_SHUTDOWN_HOOKS: '1', EMBEDDED_STEP_MS: '1' });
    await second.event('ready');
    expect(second.output()).toContain(`(pid ${orphan}, port ${port}) outlived the app that started it (pid ${first.child.pid}`);
    expect(isRunning(orphan)).toBe(false);
    await clientEnded;
    second.child.kill('SIGTERM');
    expect((await second.exited).signal === 'SIGTERM' || (await second.exited).code === 0).toBe(true);
  }, 120_000);

  it('without shutdown hooks the app warns, and SIGTERM still stops the server: nothing is left holding its port or directory', async () => {
    const port = await freePort();
    const app = startApp(port, { EMBEDDED_STEP_MS: '60000' });
    await app.event('started');
    await waitFor('the warning', () => app.output().includes('no shutdown hooks are enabled'), 10_000);
    app.child.kill('SIGTERM');
    expect((await app.exited).signal).toBe('SIGTERM');
    // A server left running would make this start fail with "in use".
    const [{ n }] = await inDatabase<{ n: number }>(port, 'SELECT count(*)::int AS n FROM cyclone_steps', []);
    expect(n).toBeGreaterThan(0);
  }, 120_000);

  describe('startup failures say what the server said', () => {
    @Injectable()
    class NoSteps {
      @Step('noop')
      noop() {
        return null;
      }
    }
    @Module({ imports: [CycloneModule.forRoot({})], providers: [NoSteps] })
    class EmbeddedModule {}

    const saved = { ...process.env };
    afterAll(() => {
      process.env = saved;
    });
    async function startupError(port: number, directory: string): Promise<unknown> {
      process.env = { ...saved, CYCLONE_DATABASE_URL: '', DATABASE_URL: '', CYCLONE_EMBEDDED_DIR: directory, CYCLONE_EMBEDDED_PORT: String(port) };
      return NestFactory.createApplicationContext(EmbeddedModule, { logger: false, abortOnError: false }).then(
        async (app) => {
          await app.close();
          return undefined;
        },
        (err: unknown) => err,
      );
    }

    it('a port another process holds', async () => {
      const port = await freePort();
      const holder: Server = createServer();
      await new Promise<void>((resolve) => holder.listen(port, '127.0.0.1', resolve));
      try {
        const err = await startupError(port, join(dir, 'unused'));
        expect(err).toBeInstanceOf(EmbeddedDatabaseError);
        expect((err as Error).message).toContain(`cannot listen on port ${port}`);
        expect((err as Error).message).toContain('CYCLONE_EMBEDDED_PORT');
      } finally {
        holder.close();
      }
    });

    it('a data directory a live server holds, with its pid', async () => {
      const running: EmbeddedDatabase = await startEmbeddedDatabase({ dir: dataDir, port: await freePort(), logger });
      try {
        const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
        const err = await startupError(await freePort(), dataDir);
        expect(err).toBeInstanceOf(EmbeddedDatabaseError);
        expect((err as Error).message).toContain(`in use by a running server (pid ${pid}, port ${running.port}) of another app that is still running (pid ${process.pid})`);
        // A server Cyclone did not start (no owner file) is never stopped: the message says how.
        rmSync(join(dataDir, 'cyclone-owner.json'));
        const foreign = await startupError(await freePort(), dataDir);
        expect((foreign as Error).message).toContain(`that Cyclone did not start. Stop it with \`kill -INT ${pid}\``);
      } finally {
        await running.stop();
      }
    });
  });

  it('the test kit starts one embedded server for the process when no URL is given, and says so once', async () => {
    const saved = { ...process.env };
    process.env = { ...saved, CYCLONE_TEST_DATABASE_URL: '', CYCLONE_DATABASE_URL: '', DATABASE_URL: '' };
    delete process.env.CYCLONE_TEST_DATABASE_URL;
    delete process.env.CYCLONE_DATABASE_URL;
    delete process.env.DATABASE_URL;
    const said = jest.spyOn(Logger.prototype, 'log');
    try {
      @Injectable()
      class Echo {
        @Step('echo')
        echo(input: unknown) {
          return input;
        }
      }
      const first = await CycloneTestEnv.create({ providers: [Echo] });
      const second = await CycloneTestEnv.create({ providers: [Echo] });
      try {
        expect(new URL(first.databaseUrl).port).toBe(new URL(second.databaseUrl).port);
        const runId = await second.client.enqueue('echo', { hello: 'kit' });
        await expect(second.client.result(runId)).resolves.toEqual({ hello: 'kit' });
      } finally {
        await first.close();
        await second.close();
      }
      const announcements = said.mock.calls.filter(([message]) => String(message).includes('started an embedded PostgreSQL'));
      expect(announcements).toHaveLength(1);
    } finally {
      said.mockRestore();
      process.env = saved;
    }
  }, 120_000);
});
