import { afterAll, afterEach, describe, expect, it, jest } from '@jest/globals';
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createClient } from 'redis';
import { pingRedis } from './support/global-setup.js';
import {
  describeWithRedis,
  freshTestRedisUrl,
  redisTestsEnabled,
  redisUnavailable,
  startRedisServer,
  testRedisDatabase,
  type RedisServer,
} from './support/redis.js';
import { waitFor } from './support/wait.js';

/**
 * The Redis harness the broker tests stand on (SPEC §17): a redis-server of a
 * test's own that it can kill and restart, losing its data as a Redis without
 * persistence does; the run's shared Redis, one database per jest worker; and
 * the skip-or-fail rule where Redis is missing. Against a real server.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** A client that reports a dead server at once instead of reconnecting. */
async function connected(url: string) {
  const client = createClient({ url, socket: { reconnectStrategy: false, connectTimeout: 2_000 } });
  client.on('error', () => {
    // A killed server is the point of some of these tests; commands report it.
  });
  await client.connect();
  return client;
}
type Client = Awaited<ReturnType<typeof connected>>;

const clients: Client[] = [];
async function client(url: string): Promise<Client> {
  const opened = await connected(url);
  clients.push(opened);
  return opened;
}
afterEach(() => {
  for (const opened of clients.splice(0)) if (opened.isOpen) opened.destroy();
});

describeWithRedis(
  'a redis-server of its own',
  () => {
    const servers: RedisServer[] = [];
    afterAll(async () => {
      for (const server of servers) await server.stop();
    });
    const start = async (options?: { persistent?: boolean }) => {
      const server = await startRedisServer(options);
      servers.push(server);
      return server;
    };

    it('answers PING and keeps a stream, on a loopback port of its own', async () => {
      const server = await start();
      expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
      expect(server.running).toBe(true);
      expect(server.pid).toEqual(expect.any(Number));
      const redis = await client(server.url);
      expect(await redis.ping()).toBe('PONG');
      await redis.xAdd('cyclone:test', '*', { step: 'a' });
      await redis.xAdd('cyclone:test', '*', { step: 'b' });
      expect(await redis.xLen('cyclone:test')).toBe(2);
    });

    it('killed, refuses connections; restarted on the same port, has lost its data', async () => {
      const server = await start();
      const redis = await client(server.url);
      await redis.xAdd('cyclone:test', '*', { step: 'a' });
      const firstPid = server.pid;

      await server.kill();
      expect([server.running, server.pid]).toEqual([false, undefined]);
      // The open connection breaks, and a new one is refused.
      await expect(redis.ping()).rejects.toThrow();
      await expect(connected(server.url)).rejects.toMatchObject({ code: 'ECONNREFUSED' });

      await server.restart();
      expect(server.running).toBe(true);
      expect(server.pid).not.toBe(firstPid);
      const again = await client(server.url);
      expect(await again.ping()).toBe('PONG');
      expect(await again.exists('cyclone:test')).toBe(0);
      expect(await again.dbSize()).toBe(0);
    });

    it('restarts a running server too, and stop() then restart() starts it again', async () => {
      const server = await start();
      await (await client(server.url)).set('k', 'v');
      await server.restart();
      expect(await (await client(server.url)).get('k')).toBeNull();
      await server.stop();
      expect(await pingRedis(server.port)).toBe(false);
      await server.restart();
      expect(await (await client(server.url)).ping()).toBe('PONG');
    });

    it('with persistence, keeps the stream through a crash when asked to', async () => {
      const server = await start({ persistent: true });
      await (await client(server.url)).xAdd('cyclone:test', '*', { step: 'a' });
      await server.kill();
      await server.restart({ keepData: true });
      expect(await (await client(server.url)).xLen('cyclone:test')).toBe(1);
      await server.restart();
      expect(await (await client(server.url)).exists('cyclone:test')).toBe(0);
    });

    it('dies with the process that started it, however the tests end', async () => {
      // A plain Node process, outside jest, starts one with the spawn code startRedisServer uses
      // (redis.ts itself loads @jest/globals) and exits without stopping it.
      const script = `
        import { mkdtempSync } from 'node:fs';
        import { tmpdir } from 'node:os';
        import { join } from 'node:path';
        const { redisServerBinary, spawnRedisOnFreePort } = await import(${JSON.stringify(join(ROOT, '.build/test/support/global-setup.js'))});
        const dir = mkdtempSync(join(tmpdir(), 'cyclone-redis-orphan-'));
        const { port } = await spawnRedisOnFreePort({ binary: redisServerBinary(), dir, persistent: false });
        process.stdout.write(JSON.stringify({ port, dir }));
        process.exit(0);`;
      const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
        cwd: ROOT,
        timeout: 20_000,
      });
      const { port, dir } = JSON.parse(stdout) as { port: number; dir: string };
      try {
        expect(port).toBeGreaterThan(0);
        await waitFor(`the orphaned redis-server on port ${port} to be gone`, async () => !(await pingRedis(port)), 5_000);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  },
  { ownServer: true },
);

describeWithRedis('the shared Redis of the run', () => {
  it('gives this worker a database of its own, emptied for each test file', async () => {
    const url = await freshTestRedisUrl();
    const database = testRedisDatabase();
    expect(database).toBeGreaterThanOrEqual(1);
    expect(database).toBeLessThanOrEqual(15);
    expect(new URL(url).pathname).toBe(`/${database}`);
    const mine = await client(url);
    expect(await mine.dbSize()).toBe(0);
    await mine.xAdd('cyclone:test', '*', { step: 'a' });
    // Database 0 of the same server (no worker's) does not see it.
    const other = new URL(url);
    other.pathname = '/0';
    expect(await (await client(other.toString())).exists('cyclone:test')).toBe(0);
    // The next file of this worker starts empty again.
    await freshTestRedisUrl();
    expect(await mine.dbSize()).toBe(0);
  });
});

describe('where Redis is missing', () => {
  it('says why the shared tests cannot run, and what to do', () => {
    const missing = redisUnavailable({}, { PATH: '' });
    expect(missing).toContain('no CYCLONE_TEST_REDIS_URL');
    expect(missing).toContain('no redis-server on PATH');
    expect(missing).toContain('apt-get install -y redis-server');
    expect(redisUnavailable({}, { PATH: '', CYCLONE_TEST_REDIS_URL: 'redis://127.0.0.1:6379' })).toBeUndefined();
    // The global setup's reason, when it tried and failed, is the one given.
    const failed = 'the global setup could not start Redis: boom';
    expect(redisUnavailable({}, { PATH: '', CYCLONE_TEST_REDIS_UNAVAILABLE: failed })).toBe(failed);
  });

  it('says why a test that starts its own cannot, whatever CYCLONE_TEST_REDIS_URL says', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cyclone-redis-path-'));
    try {
      const binary = join(dir, 'redis-server');
      writeFileSync(binary, '#!/bin/sh\n', { mode: 0o644 });
      const env = { PATH: dir, CYCLONE_TEST_REDIS_URL: 'redis://127.0.0.1:6379' };
      // Not executable: no redis-server there.
      expect(redisUnavailable({ ownServer: true }, env)).toContain('no redis-server on PATH');
      chmodSync(binary, 0o755);
      expect(redisUnavailable({ ownServer: true }, env)).toBeUndefined();
      expect(redisUnavailable({ ownServer: true }, { PATH: '', CYCLONE_TEST_REDIS_SERVER: binary })).toBeUndefined();
      expect(redisUnavailable({ ownServer: true }, { PATH: dir, CYCLONE_TEST_REDIS_SERVER: '/nonexistent/redis-server' })).toContain(
        'CYCLONE_TEST_REDIS_SERVER (/nonexistent/redis-server) is not an executable',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('skips saying so, or with CYCLONE_TEST_REQUIRE_REDIS fails', () => {
    // jest gives each test file a copy of process.env: these changes stay in this file.
    const saved = { ...process.env };
    const stderr = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      process.env.CYCLONE_TEST_REDIS_SERVER = '/nonexistent/redis-server';
      delete process.env.CYCLONE_TEST_REQUIRE_REDIS;
      expect(redisTestsEnabled({ ownServer: true })).toBe(false);
      expect(stderr).toHaveBeenCalledWith(expect.stringContaining('[cyclone tests] Redis tests skipped: CYCLONE_TEST_REDIS_SERVER'));
      process.env.CYCLONE_TEST_REQUIRE_REDIS = '1';
      expect(() => redisTestsEnabled({ ownServer: true })).toThrow(/CYCLONE_TEST_REQUIRE_REDIS is set.*CYCLONE_TEST_REDIS_SERVER/);
    } finally {
      stderr.mockRestore();
      process.env = saved;
    }
  });
});
