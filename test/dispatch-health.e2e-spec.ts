import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { createClient } from 'redis';
import { Registry } from 'prom-client';
import { RedisUnavailableError, Step } from 'cyclone-nestjs';
import { CycloneHealthIndicator, CycloneHealthModule } from 'cyclone-nestjs/health';
import { CycloneMetrics, CycloneMetricsModule, DISPATCH_METRIC_NAMES } from 'cyclone-nestjs/metrics';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { CycloneStats } from '../libs/cyclone/src/runtime/cyclone-stats.js';
import { expectCycloneError } from './support/e2e-helpers.js';
import { describeWithRedis, startRedisServer, type RedisServer } from './support/redis.js';
import { sql } from './support/sql.js';
import { waitFor } from './support/wait.js';

const ran: string[] = [];

@Injectable()
class Steps {
  @Step('note')
  async note(input: { key: string }) {
    ran.push(input.key);
    return input.key;
  }
}

describeWithRedis(
  'broker dispatch: startup, health, metrics and foreign messages',
  () => {
    const envs: CycloneTestEnv[] = [];
    const servers: RedisServer[] = [];
    afterEach(async () => {
      for (const env of envs.splice(0).reverse()) await env.close();
      for (const server of servers.splice(0)) await server.stop();
      ran.length = 0;
    });

    /** A Redis of this test's own, stopped: its port refuses connections until `restart()`. */
    async function stoppedRedis(): Promise<RedisServer> {
      const server = await startRedisServer();
      servers.push(server);
      await server.stop();
      return server;
    }

    const create = async (options: Parameters<typeof CycloneTestEnv.create>[0]) => {
      const env = await CycloneTestEnv.create({ providers: [Steps], ...options });
      envs.push(env);
      return env;
    };

    it("with whenRedisDown 'wait', an unreachable Redis fails the start with a typed error naming its host, never its password", async () => {
      const redis = await stoppedRedis();
      const url = `redis://user:s3cret@127.0.0.1:${redis.port}`;
      const error = await expectCycloneError(create({ dispatch: { redis: { url }, whenRedisDown: 'wait' } }), RedisUnavailableError, 'redis_unavailable');
      expect(error.message).toContain(`127.0.0.1:${redis.port}`);
      expect(error.message).not.toContain('s3cret');
    });

    it("with whenRedisDown 'claim', the app starts without Redis, claims from PostgreSQL, and moves to the streams once Redis answers", async () => {
      const redis = await stoppedRedis();
      const env = await create({
        imports: [CycloneHealthModule, CycloneMetricsModule.forRoot({ registry: new Registry(), sampleInterval: 50 })],
        leaseTtl: '1s',
        dispatch: { redis: { url: redis.url } },
      });
      // Jobs come from another client, so that the worker's own enqueues (started in its own statement) do not stand in for its claims.
      const producer = await create({
        runWorkers: false,
        databaseUrl: env.databaseUrl,
        isolate: false,
        dispatch: { redis: { url: redis.url } },
      });
      const health = env.app.get(CycloneHealthIndicator);
      const degraded = await health.isHealthy('cyclone');
      expect(degraded.cyclone).toMatchObject({ status: 'degraded', dispatch: { redis: 'down' } });
      // Work goes on meanwhile: the worker claims from PostgreSQL.
      await expect(env.client.result(await producer.client.enqueue('note', { key: 'during' }), { timeout: 20_000 })).resolves.toBe(
        'during',
      );

      await redis.restart();
      await waitFor('Redis to be seen as up', async () => (env.app.get(CycloneStats).dispatch?.redisUp() ? true : undefined), 20_000);
      const runId = await producer.client.enqueue('note', { key: 'after' });
      await expect(env.client.result(runId, { timeout: 20_000 })).resolves.toBe('after');
      await waitFor('the outbox to be published', async () => {
        const [{ n }] = await sql<{ n: number }>(env, 'SELECT count(*)::int AS n FROM cyclone_outbox');
        return n === 0 ? true : undefined;
      });
      const up = await health.isHealthy('cyclone');
      expect(up.cyclone).toMatchObject({ status: 'up', dispatch: { redis: 'up', outbox: { rows: 0 } } });

      const exposition = await env.app.get(CycloneMetrics).metrics();
      for (const name of DISPATCH_METRIC_NAMES) expect(exposition).toContain(`cyclone_${name}`);
      expect(exposition).toContain('cyclone_redis_up 1');
      // The job after Redis came back went through a stream: one of the two clients' publishers sent it.
      const published = [env, producer].map((e) => e.app.get(CycloneStats).dispatch!.published.get('default') ?? 0);
      expect(published[0] + published[1]).toBeGreaterThanOrEqual(1);
      if (published[0] > 0) expect(exposition).toContain(`cyclone_dispatch_published_total{queue="default"} ${published[0]}`);
    });

    it('acknowledges and counts a message that is not Cyclone\'s, runs nothing for it, and keeps working', async () => {
      const redis = await startRedisServer();
      servers.push(redis);
      const env = await create({ dispatch: { redis: { url: redis.url } } });
      await expect(env.client.result(await env.client.enqueue('note', { key: 'first' }), { timeout: 20_000 })).resolves.toBe('first');
      const client = createClient({ url: redis.url });
      await client.connect();
      try {
        await client.xAdd('cyclone:stream:default:0', '*', { hello: 'world' });
        await client.xAdd('cyclone:stream:default:0', '*', { step: '1; DROP TABLE x', run: 'nope', kind: 'note', type: 'step' });
        const stats = env.app.get(CycloneStats).dispatch!;
        await waitFor('both foreign messages to be dropped', async () => (stats.malformed === 2 ? true : undefined), 20_000);
        await waitFor('nothing left pending', async () =>
          (await client.xPending('cyclone:stream:default:0', 'cyclone')).pending === 0 ? true : undefined,
        );
      } finally {
        client.destroy();
      }
      await expect(env.client.result(await env.client.enqueue('note', { key: 'second' }), { timeout: 20_000 })).resolves.toBe('second');
      expect(ran).toEqual(['first', 'second']);
    });
  },
  { ownServer: true },
);
