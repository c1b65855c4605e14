// Loaded by jest outside its module system: keep this file free of relative imports.
// For that reason it also holds the few lines that start a private redis-server
// (spawnRedisServer and its helpers): test/support/redis.ts builds on them rather
// than keeping a second copy.
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { runInThisContext } from 'node:vm';

export interface TestServer {
  url: string;
  /** Where the server came from, for the log line. */
  source: 'testcontainers' | 'embedded';
  stop(): Promise<void>;
}

/** The Redis of the ordinary broker tests, shared by every test file of the run. */
export interface TestRedis {
  url: string;
  /** Where it came from, for the log line. */
  source: 'testcontainers' | 'redis-server';
  stop(): Promise<void>;
}

/** How long to wait for a container runtime to answer before using the embedded server. */
const RUNTIME_PROBE_MS = 5_000;

export async function startTestServer(): Promise<TestServer> {
  const container = await startContainer();
  const server = container ?? (await startEmbedded());
  process.stderr.write(`\n[cyclone tests] PostgreSQL from ${server.source}: ${server.url}\n`);
  return server;
}

/**
 * Whether a container runtime answers, asked once per process: PostgreSQL and
 * Redis both start in one when it does, and each probe may take seconds.
 */
let runtimeProbe: Promise<boolean> | undefined;
function containerRuntimeAnswers(): Promise<boolean> {
  if (process.env.CYCLONE_TEST_NO_CONTAINERS) return Promise.resolve(false);
  runtimeProbe ??= import('testcontainers').then(({ getContainerRuntimeClient }) =>
    Promise.race([
      getContainerRuntimeClient().then(
        () => true,
        () => false,
      ),
      new Promise<false>((resolve) => setTimeout(() => resolve(false), RUNTIME_PROBE_MS).unref()),
    ]),
  );
  return runtimeProbe;
}

async function startContainer(): Promise<TestServer | undefined> {
  if (!(await containerRuntimeAnswers())) return undefined;
  const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
  const container = await new PostgreSqlContainer('postgres:18-alpine')
    .withCommand(['postgres', '-c', 'fsync=off', '-c', 'max_connections=500'])
    .start();
  return {
    url: container.getConnectionUri(),
    source: 'testcontainers',
    stop: async () => void (await container.stop()),
  };
}

async function startEmbedded(): Promise<TestServer> {
  // The package's own test server (built by pretest): a throwaway embedded PostgreSQL.
  const { startTestServer: startPackageTestServer } = await import('cyclone-nestjs/testing');
  const server = await startPackageTestServer();
  return { url: server.url, source: 'embedded', stop: () => server.stop() };
}

// ---------------------------------------------------------------------------
// Redis
// ---------------------------------------------------------------------------

/**
 * Starts the run's shared Redis: a testcontainers container when a container
 * runtime answers, else a private redis-server on a free loopback port.
 * Without either it returns why not, and the broker tests skip saying so (or
 * fail, with CYCLONE_TEST_REQUIRE_REDIS set). A Redis that cannot start never
 * stops the PostgreSQL tests from running.
 */
export async function startTestRedis(): Promise<TestRedis | string> {
  let redis: TestRedis;
  try {
    const container = await startRedisContainer();
    if (container) redis = container;
    else {
      const binary = redisServerBinary();
      if (!binary) return noRedisReason();
      redis = await startLocalRedis(binary);
    }
  } catch (err) {
    return `the global setup could not start Redis: ${(err as Error).message}`;
  }
  return redis;
}

/** Why the run has no Redis when neither CYCLONE_TEST_REDIS_URL, a container runtime nor a redis-server binary gives one. */
export function noRedisReason(env: NodeJS.ProcessEnv = process.env): string {
  return (
    `no CYCLONE_TEST_REDIS_URL, no container runtime and ${redisServerMissing(env)}. ` +
    "Install Debian's redis-server package (apt-get install -y redis-server), " +
    'or set CYCLONE_TEST_REDIS_URL to a Redis 6.2 or later that the tests may wipe.'
  );
}

/** What is wrong with the redis-server binary that `redisServerBinary` did not find. */
export function redisServerMissing(env: NodeJS.ProcessEnv = process.env): string {
  return env.CYCLONE_TEST_REDIS_SERVER
    ? `CYCLONE_TEST_REDIS_SERVER (${env.CYCLONE_TEST_REDIS_SERVER}) is not an executable file`
    : 'no redis-server on PATH';
}

async function startRedisContainer(): Promise<TestRedis | undefined> {
  if (!(await containerRuntimeAnswers())) return undefined;
  const { RedisContainer } = await import('@testcontainers/redis');
  const container = await new RedisContainer('redis:7-alpine').start();
  return {
    url: container.getConnectionUrl(),
    source: 'testcontainers',
    stop: async () => void (await container.stop()),
  };
}

async function startLocalRedis(binary: string): Promise<TestRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'cyclone-test-redis-'));
  const started = await spawnRedisOnFreePort({ binary, dir, persistent: false }).catch((err: unknown) => {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  });
  const { child, port } = started;
  return {
    url: `redis://127.0.0.1:${port}`,
    source: 'redis-server',
    stop: async () => {
      await stopRedisProcess(child, 'SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The redis-server to start: CYCLONE_TEST_REDIS_SERVER if set, else the first
 * executable `redis-server` on PATH; undefined when there is none.
 */
export function redisServerBinary(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const executable = (path: string) => {
    try {
      accessSync(path, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  if (env.CYCLONE_TEST_REDIS_SERVER) return executable(env.CYCLONE_TEST_REDIS_SERVER) ? env.CYCLONE_TEST_REDIS_SERVER : undefined;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir !== '' && executable(join(dir, 'redis-server'))) return join(dir, 'redis-server');
  }
  return undefined;
}

/** How often and how many times a new redis-server is asked for PONG before it counts as failed (about 10 s). */
const READY_POLL_MS = 20;
const READY_TRIES = 500;

export interface RedisSpawnOptions {
  binary: string;
  /** Its working directory: the log, and with persistence its append-only file. */
  dir: string;
  /** Keep an append-only file (fsync always) in `dir`; otherwise nothing is ever written to disk. */
  persistent: boolean;
}

/**
 * Starts redis-server on `port` (loopback only) and resolves once it answers
 * PING, polling a bounded number of times; rejects with the end of its log
 * when it exits first (a port taken since it was picked, say) or never answers.
 * The process is killed when this process exits, however the tests end.
 */
export async function spawnRedisServer(port: number, options: RedisSpawnOptions): Promise<ChildProcess> {
  const log = join(options.dir, 'redis.log');
  const storage = options.persistent
    ? ['--appendonly', 'yes', '--appendfsync', 'always', '--save', '']
    : ['--save', '', '--appendonly', 'no'];
  const child = spawn(
    options.binary,
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', options.dir, '--logfile', log, '--daemonize', 'no', ...storage],
    { stdio: 'ignore' },
  );
  // Never the reason a jest worker stays alive: the exit hook below ends it.
  child.unref();
  killOnExit(child);
  let exited: string | undefined;
  child.once('exit', (code, signal) => (exited = signal ?? `code ${code}`));
  child.once('error', (err) => (exited = err.message));
  const logTail = () => {
    try {
      return readFileSync(log, 'utf8').trim().split('\n').slice(-3).join(' | ');
    } catch {
      return '(no log)';
    }
  };
  for (let tries = 1; ; tries++) {
    if (exited !== undefined) throw new Error(`redis-server on port ${port} exited (${exited}) before answering PING: ${logTail()}`);
    if (await pingRedis(port)) return child;
    if (tries >= READY_TRIES) {
      await stopRedisProcess(child, 'SIGKILL');
      throw new Error(`redis-server on port ${port} did not answer PING after ${tries} tries: ${logTail()}`);
    }
    await delay(READY_POLL_MS);
  }
}

/** spawnRedisServer on a free port, picking another if the port was taken between the pick and the bind. */
export async function spawnRedisOnFreePort(options: RedisSpawnOptions): Promise<{ child: ChildProcess; port: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freeLoopbackPort();
    try {
      return { child: await spawnRedisServer(port, options), port };
    } catch (err) {
      if (attempt >= 3) throw err;
    }
  }
}

/** Sends `signal` (SIGTERM: Redis shuts down cleanly; SIGKILL: a crash) and waits for the process to exit. */
export async function stopRedisProcess(child: ChildProcess, signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  await exited;
}

/**
 * Whether a Redis on the loopback `port` answers PING with PONG, in RESP by
 * hand so this file loads no client library. Any error, a refused connection,
 * a LOADING reply or silence past `timeoutMs` count as no.
 */
export function pingRedis(port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let reply = '';
    const done = (answered: boolean) => {
      socket.destroy();
      resolve(answered);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString('latin1');
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
  });
}

/** A loopback port nothing listens on at the moment. */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

const EXIT_HOOKS = Symbol.for('cyclone.tests.exitHooks');

/**
 * Runs `cleanup` (synchronous) when this process exits, and returns a
 * function that cancels it. Inside a jest worker `process` is a copy per test
 * file whose 'exit' never fires, so the hook goes on the real process, which
 * the main context hands out; one listener per process serves every file.
 */
export function onProcessExit(cleanup: () => void): () => void {
  const real = runInThisContext('process') as NodeJS.Process & { [EXIT_HOOKS]?: Set<() => void> };
  let hooks = real[EXIT_HOOKS];
  if (!hooks) {
    const registered = new Set<() => void>();
    hooks = real[EXIT_HOOKS] = registered;
    real.once('exit', () => {
      for (const hook of registered) {
        try {
          hook();
        } catch {
          // Best effort on the way out: one failed cleanup must not skip the rest.
        }
      }
    });
  }
  const set = hooks;
  set.add(cleanup);
  return () => void set.delete(cleanup);
}

function killOnExit(child: ChildProcess): void {
  const cancel = onProcessExit(() => child.kill('SIGKILL'));
  child.once('exit', cancel);
}

// ---------------------------------------------------------------------------

/**
 * Gives every test file a PostgreSQL server through CYCLONE_TEST_DATABASE_URL:
 * the one already set, else a testcontainers container when a container
 * runtime answers, else an embedded server. Test environments create their
 * own databases on it.
 *
 * And a Redis through CYCLONE_TEST_REDIS_URL, found the same way: the one
 * already set, else a container, else a private redis-server. When there is
 * none, CYCLONE_TEST_REDIS_UNAVAILABLE tells the workers why, and the broker
 * tests skip (see test/support/redis.ts).
 */
export default async function globalSetup(): Promise<void> {
  const state = globalThis as { __cycloneTestServer?: TestServer; __cycloneTestRedis?: TestRedis };
  if (!process.env.CYCLONE_TEST_DATABASE_URL) {
    const server = await startTestServer();
    process.env.CYCLONE_TEST_DATABASE_URL = server.url;
    state.__cycloneTestServer = server;
  }
  if (!process.env.CYCLONE_TEST_REDIS_URL) {
    const redis = await startTestRedis();
    // On the line after PostgreSQL's, which starts with a line break of its own.
    const lead = state.__cycloneTestServer ? '' : '\n';
    if (typeof redis === 'string') {
      process.stderr.write(`${lead}[cyclone tests] Redis: none, the broker tests skip: ${redis}\n`);
      process.env.CYCLONE_TEST_REDIS_UNAVAILABLE = redis;
    } else {
      process.stderr.write(`${lead}[cyclone tests] Redis from ${redis.source}: ${redis.url}\n`);
      process.env.CYCLONE_TEST_REDIS_URL = redis.url;
      state.__cycloneTestRedis = redis;
    }
  }
}
