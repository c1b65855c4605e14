import { describe } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'redis';
import {
  noRedisReason,
  onProcessExit,
  redisServerBinary,
  redisServerMissing,
  spawnRedisOnFreePort,
  spawnRedisServer,
  stopRedisProcess,
} from './global-setup.js';

/**
 * Redis for the broker tests (SPEC §17), always a real server, never a mock.
 *
 * Ordinary broker tests share the run's Redis: CYCLONE_TEST_REDIS_URL, which
 * the global setup sets when the caller did not (a testcontainers container
 * where a container runtime answers, else a private redis-server). Fault
 * tests start a redis-server of their own with `startRedisServer()`, so that
 * they can kill it, wipe it and start it again without touching anyone else.
 *
 * Where Redis is missing these tests skip and say why; with
 * CYCLONE_TEST_REQUIRE_REDIS set (CI) they fail instead.
 */

export interface RedisServerOptions {
  /**
   * Keep an append-only file (fsync always), so that `restart({ keepData: true })`
   * finds the data again. Off by default: nothing is ever written to disk.
   */
  persistent?: boolean;
}

/** A redis-server of one test's own, on a loopback port that stays the same across restarts. */
export interface RedisServer {
  /** redis://127.0.0.1:<port>, database 0. */
  readonly url: string;
  readonly port: number;
  /** The current process's id (a restart makes a new one); undefined while it is down. */
  readonly pid: number | undefined;
  readonly running: boolean;
  /** SIGKILL, as a crash: clients see their connections reset, then connections refused. */
  kill(): Promise<void>;
  /** A clean shutdown (SIGTERM); deletes its directory. `restart()` may still start it again. */
  stop(): Promise<void>;
  /**
   * Kills it if it runs and starts it again on the same port. Unless
   * `keepData` (with `persistent`), it starts from an empty directory, so
   * every key and stream is gone, as when a Redis without persistence crashes
   * and comes back.
   */
  restart(options?: { keepData?: boolean }): Promise<void>;
}

/**
 * Starts a private redis-server on a free loopback port and resolves once it
 * answers PING. It never outlives the jest worker: whatever a test leaves
 * running is killed when the worker exits. Needs a redis-server binary (see
 * `redisUnavailable({ ownServer: true })`).
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const binary = redisServerBinary();
  if (!binary) throw new Error(`Cannot start a Redis: ${ownServerMissing()}`);
  const persistent = options.persistent ?? false;
  let dir = newDir();
  const forgetDir = onProcessExit(() => rmSync(dir, { recursive: true, force: true }));
  let child: ChildProcess | undefined;
  let port: number;
  try {
    ({ child, port } = await spawnRedisOnFreePort({ binary, dir, persistent }));
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    forgetDir();
    throw err;
  }
  const alive = () => child !== undefined && child.exitCode === null && child.signalCode === null;
  const down = async (signal: 'SIGTERM' | 'SIGKILL') => {
    if (child) await stopRedisProcess(child, signal);
    child = undefined;
  };
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    get pid() {
      return alive() ? child!.pid : undefined;
    },
    get running() {
      return alive();
    },
    kill: () => down('SIGKILL'),
    async stop() {
      await down('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
    async restart({ keepData = false } = {}) {
      await down('SIGKILL');
      if (!keepData) {
        rmSync(dir, { recursive: true, force: true });
        dir = newDir();
      }
      // After stop() the directory is gone; with keepData it then starts empty all the same.
      mkdirSync(dir, { recursive: true });
      child = await spawnRedisServer(port, { binary, dir, persistent });
    },
  };
}

const newDir = () => mkdtempSync(join(tmpdir(), 'cyclone-redis-'));

const ownServerMissing = (env: NodeJS.ProcessEnv = process.env) =>
  `${redisServerMissing(env)}, and these tests start a Redis of their own to kill and restart. ` +
  "Install Debian's redis-server package (apt-get install -y redis-server) or set CYCLONE_TEST_REDIS_SERVER to a redis-server binary.";

/**
 * Why the Redis tests cannot run here, or undefined when they can. Ordinary
 * broker tests need CYCLONE_TEST_REDIS_URL (set by the caller or by the global
 * setup); `ownServer` tests, which start their own, need a redis-server binary
 * whatever CYCLONE_TEST_REDIS_URL says.
 */
export function redisUnavailable(options: { ownServer?: boolean } = {}, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (options.ownServer) return redisServerBinary(env) ? undefined : ownServerMissing(env);
  if (env.CYCLONE_TEST_REDIS_URL) return undefined;
  // Set by the global setup when it found no Redis or could not start one.
  return env.CYCLONE_TEST_REDIS_UNAVAILABLE ?? noRedisReason(env);
}

/**
 * Whether these Redis tests can run here. Without Redis they are skipped and
 * say so plainly; with CYCLONE_TEST_REQUIRE_REDIS set (CI), a missing Redis
 * fails the run instead.
 */
export function redisTestsEnabled(options: { ownServer?: boolean } = {}): boolean {
  const missing = redisUnavailable(options);
  if (missing === undefined) return true;
  if (process.env.CYCLONE_TEST_REQUIRE_REDIS) throw new Error(`The Redis tests cannot run (CYCLONE_TEST_REQUIRE_REDIS is set): ${missing}`);
  process.stderr.write(`\n[cyclone tests] Redis tests skipped: ${missing}\n`);
  return false;
}

/** `describe`, or where Redis is missing a skipped one, as the browser tests do (the line above it says why). */
export function describeWithRedis(name: string, fn: () => void, options: { ownServer?: boolean } = {}): void {
  (redisTestsEnabled(options) ? describe : describe.skip)(name, fn);
}

/**
 * The logical database of this jest worker on the shared Redis, 1 to 15.
 *
 * Isolation is by database, not by key prefix: Cyclone names its streams and
 * keys itself, so only a database of its own keeps one test file from reading
 * another's streams. Two workers (maxWorkers) run files at the same time, each
 * on its own database; the files of one worker run one after another on the
 * same database, which `freshTestRedisUrl()` empties first. Database 0 is
 * left to people looking on with redis-cli. Two jest runs sharing one
 * CYCLONE_TEST_REDIS_URL would collide: give each run its own Redis.
 */
export function testRedisDatabase(): number {
  const worker = Number(process.env.JEST_WORKER_ID ?? '1');
  return ((Math.max(worker, 1) - 1) % 15) + 1;
}

/** The shared Redis on this worker's database (see `testRedisDatabase`), as it stands. */
export function testRedisUrl(): string {
  const base = process.env.CYCLONE_TEST_REDIS_URL;
  if (!base) throw new Error(`No Redis for the tests: ${redisUnavailable()}`);
  const url = new URL(base);
  url.pathname = `/${testRedisDatabase()}`;
  return url.toString();
}

/**
 * `testRedisUrl()` after emptying its database (FLUSHDB), so that a test file
 * starts with no stream, group or key an earlier file of this worker left.
 * Call it in `beforeAll`. It wipes that database of CYCLONE_TEST_REDIS_URL:
 * point that variable only at a Redis the tests may wipe.
 */
export async function freshTestRedisUrl(): Promise<string> {
  const url = testRedisUrl();
  const client = createClient({ url, socket: { reconnectStrategy: false } });
  client.on('error', () => {
    // Reported by the command that fails, below.
  });
  await client.connect();
  try {
    await client.flushDb();
  } finally {
    client.destroy();
  }
  return url;
}
