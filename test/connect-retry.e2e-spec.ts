import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, Module } from '@nestjs/common';
import { CycloneClient, CycloneModule, DatabaseUnavailableError, Step, type CycloneModuleOptions } from 'cyclone-nestjs';
import { AppHarness, CapturingLogger, testServerUrl } from './support/nest-app-harness.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { waitFor } from './support/wait.js';

/**
 * SPEC §16: startup retries the database like @nestjs/typeorm
 * (`connectRetry: { attempts, delay }`), and the final error names the
 * server and where its URL came from, never the password.
 */

@Injectable()
class Steps {
  @Step('echo')
  async echo(input: unknown) {
    return input;
  }
}

const harness = new AppHarness();
let proxy: TcpProxy;
const PASSWORD = 's3cret-pw';

beforeAll(async () => {
  proxy = await TcpProxy.start(testServerUrl());
});
afterEach(() => harness.cleanup());
afterAll(() => proxy?.close());

function appModule(options: CycloneModuleOptions) {
  @Module({ imports: [CycloneModule.forRoot({ pollInterval: [50, 200], ...options })], providers: [Steps] })
  class AppModule {}
  return AppModule;
}

/** A URL through the proxy with a password the server never sees (the proxy is down). */
function unreachableUrl(): string {
  const url = new URL(proxy.urlFor('nowhere'));
  url.password = PASSWORD;
  return url.toString();
}

async function withEnv<T>(vars: Record<string, string | undefined>, fn: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  for (const [k, v] of Object.entries(vars)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

describe('connectRetry', () => {
  it.each([
    ['the connection option', (url: string) => ({ options: { connection: { url } }, env: {} })],
    ['CYCLONE_DATABASE_URL', (url: string) => ({ options: {}, env: { CYCLONE_DATABASE_URL: url, DATABASE_URL: undefined } })],
    ['DATABASE_URL', (url: string) => ({ options: {}, env: { CYCLONE_DATABASE_URL: undefined, DATABASE_URL: url } })],
  ])(
    'gives up after its attempts with DatabaseUnavailableError naming the server and that the URL came from %s, without the password',
    async (source, setting) => {
      await proxy.down();
      const { options, env } = setting(unreachableUrl());
      const logger = new CapturingLogger();
      const started = Date.now();
      const err = await withEnv(env, () =>
        harness.start(appModule({ ...options, connectRetry: { attempts: 3, delay: 150 } }), logger).catch((e: unknown) => e),
      );
      const ms = Date.now() - started;
      expect(err).toBeInstanceOf(DatabaseUnavailableError);
      const message = (err as Error).message;
      expect(message).toContain('Cyclone could not connect to PostgreSQL');
      expect(message).toContain(`127.0.0.1:${proxy.port}/nowhere`);
      expect(message).toContain(`(URL from ${source})`);
      expect(message).toContain('ECONNREFUSED');
      expect(message).toContain('3 attempts');
      // Two waits of 150 ms between three attempts.
      expect(ms).toBeGreaterThanOrEqual(300);
      expect(ms).toBeLessThan(5_000);
      // Each failed attempt but the last said it would retry; nothing said the password.
      expect(logger.messages.filter((m) => m.startsWith('Cannot connect to PostgreSQL'))).toHaveLength(2);
      expect([message, ...logger.messages].filter((m) => m.includes(PASSWORD))).toEqual([]);
    },
  );

  it('starts once the server accepts connections, within its attempts', async () => {
    const db = await harness.database();
    await proxy.down();
    const logger = new CapturingLogger();
    const starting = harness.start(
      appModule({ connection: { url: proxy.urlFor(new URL(db.url).pathname.slice(1)) }, connectRetry: { attempts: 40, delay: 100 } }),
      logger,
    );
    // Down for three tries, however long each takes on a busy machine; then the server comes up.
    const retries = () => logger.messages.filter((m) => m.startsWith('Cannot connect to PostgreSQL')).length;
    await waitFor('three failed tries', () => retries() >= 3, 20_000);
    await proxy.up();
    const app = await starting;
    expect(retries()).toBeGreaterThanOrEqual(3);
    const client = app.get(CycloneClient);
    const runId = await client.enqueue('echo', { up: true });
    await expect(client.result(runId, { timeout: 10_000 })).resolves.toEqual({ up: true });
  });
});
