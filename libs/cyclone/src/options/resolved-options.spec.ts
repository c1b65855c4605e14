import { describe, it, expect } from '@jest/globals';
import { resolveOptions } from './resolved-options.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import type { CycloneModuleOptions } from './cyclone-module-options.interface.js';

function rejection(options: unknown): Error {
  try {
    resolveOptions(options as CycloneModuleOptions);
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected resolveOptions to reject');
}

describe('resolveOptions', () => {
  it('applies the documented defaults', () => {
    const resolved = resolveOptions({});
    expect([...resolved.queues]).toEqual([['default', 10]]);
    expect(resolved.queuesConfigured).toBe(false);
    expect(resolved.leaseTtlMs).toBe(30_000);
    expect(resolved.pollIntervalMs).toEqual([100, 1_000]);
    expect(resolved.maxReclaims).toBeNull();
    expect(resolved.shutdownTimeoutMs).toBe(10_000);
    expect(resolved.runWorkers).toBe(true);
    expect(resolved.migrationsRun).toBe(true);
    expect(resolved.retentionMs).toBe(7 * 24 * 3_600_000);
    expect(resolved.maxPayloadBytes).toBe(1024 * 1024);
    expect(resolved.connection).toBeUndefined();
    // @nestjs/typeorm's retryAttempts and retryDelay; River's timeout for its maintenance queries.
    expect(resolved.connectRetry).toEqual({ attempts: 9, delayMs: 3_000 });
    expect(resolved.statementTimeoutMs).toBe(30_000);
    expect(resolved.partitionMonthsAhead).toBe(3);
    expect(resolved.partitionDropAfterMs).toBe(0);
  });

  it('takes the partition settings, and false for partitions that are never dropped', () => {
    expect(resolveOptions({ partitions: { monthsAhead: 6, dropAfter: '90d' } })).toMatchObject({
      partitionMonthsAhead: 6,
      partitionDropAfterMs: 90 * 86_400_000,
    });
    expect(resolveOptions({ partitions: { dropAfter: false } }).partitionDropAfterMs).toBeNull();
  });

  it('also works with no argument at all', () => {
    expect(resolveOptions().leaseTtlMs).toBe(30_000);
  });

  it('turns durations given as strings into milliseconds', () => {
    const resolved = resolveOptions({
      leaseTtl: '10s',
      pollInterval: ['250ms', '2s'],
      shutdownTimeout: '1m',
      retention: '1d',
    });
    expect(resolved.leaseTtlMs).toBe(10_000);
    expect(resolved.pollIntervalMs).toEqual([250, 2_000]);
    expect(resolved.shutdownTimeoutMs).toBe(60_000);
    expect(resolved.retentionMs).toBe(86_400_000);
    expect(resolveOptions({ connectRetry: { attempts: 2, delay: '250ms' }, statementTimeout: '5s' })).toMatchObject({
      connectRetry: { attempts: 2, delayMs: 250 },
      statementTimeoutMs: 5_000,
    });
  });

  it('keeps the configured queues, and only them', () => {
    const resolved = resolveOptions({ queues: { bulk: { workers: 3 }, mail: { workers: 0 } } });
    expect([...resolved.queues]).toEqual([
      ['bulk', 3],
      ['mail', 0],
    ]);
    expect(resolved.queuesConfigured).toBe(true);
  });

  it('keeps the other settings given', () => {
    const connection = { url: 'postgres://u:p@db:5432/app' };
    const resolved = resolveOptions({
      connection,
      maxReclaims: 3,
      runWorkers: false,
      migrationsRun: 'verify',
      maxPayloadBytes: 4096,
      isGlobal: false,
    } as CycloneModuleOptions);
    expect(resolved.connection).toBe(connection);
    expect(resolved.maxReclaims).toBe(3);
    expect(resolved.runWorkers).toBe(false);
    expect(resolved.migrationsRun).toBe('verify');
    expect(resolved.maxPayloadBytes).toBe(4096);
    expect(resolveOptions({ migrationsRun: false }).migrationsRun).toBe(false);
  });

  it.each([
    ['an unknown option', { leaseTTL: '30s' }, 'leaseTTL'],
    ['a negative lease TTL', { leaseTtl: -1 }, 'leaseTtl'],
    ['an unparsable lease TTL', { leaseTtl: '30 secs' }, 'leaseTtl'],
    ['a lease TTL too short to heartbeat', { leaseTtl: 10 }, 'leaseTtl'],
    ['a zero poll interval', { pollInterval: [0, 100] }, 'pollInterval'],
    ['a poll interval with max below min', { pollInterval: ['2s', '1s'] }, 'pollInterval'],
    ['a bad poll bound', { pollInterval: ['1s', 'soon'] }, 'pollInterval[1]'],
    ['a negative worker count', { queues: { default: { workers: -1 } } }, 'queues.default.workers'],
    ['a fractional worker count', { queues: { default: { workers: 1.5 } } }, 'queues.default.workers'],
    ['a queue that is not an object', { queues: { default: 5 } }, 'queues.default'],
    ['an empty queue name', { queues: { '': { workers: 1 } } }, 'queues'],
    ['a negative maxReclaims', { maxReclaims: -1 }, 'maxReclaims'],
    ['a bad migrationsRun', { migrationsRun: 'yes' }, 'migrationsRun'],
    ['a negative shutdown timeout', { shutdownTimeout: -5 }, 'shutdownTimeout'],
    ['a bad retention', { retention: 'forever' }, 'retention'],
    ['a zero payload limit', { maxPayloadBytes: 0 }, 'maxPayloadBytes'],
    ['no months ahead', { partitions: { monthsAhead: 0 } }, 'partitions.monthsAhead'],
    ['a bad partition drop delay', { partitions: { dropAfter: 'soon' } }, 'partitions.dropAfter'],
    ['true for the drop delay', { partitions: { dropAfter: true } }, 'partitions.dropAfter'],
    ['an unknown partition option', { partitions: { monthsBehind: 1 } }, 'monthsBehind'],
    ['partitions that are not an object', { partitions: 3 }, 'partitions'],
    ['zero connect attempts', { connectRetry: { attempts: 0 } }, 'connectRetry.attempts'],
    ['a bad connect delay', { connectRetry: { delay: 'soon' } }, 'connectRetry.delay'],
    ['an unknown connectRetry key', { connectRetry: { retries: 3 } }, 'retries'],
    ['a connectRetry that is not an object', { connectRetry: 3 }, 'connectRetry'],
    ['a negative statement timeout', { statementTimeout: -1 }, 'statementTimeout'],
    ['options that are null', null, 'CycloneModule options'],
    ['queues that are an array', { queues: [] }, 'queues'],
    ['a pollInterval that is not a pair', { pollInterval: 100 }, 'pollInterval'],
    ['a runWorkers that is not a boolean', { runWorkers: 'no' }, 'runWorkers'],
    ['a connection that is a string', { connection: 'postgres://x' }, 'connection'],
    ['a connection url that is not a string', { connection: { url: 5 } }, 'connection.url'],
  ])('rejects %s with InvalidOptionError naming it', (_label, options, name) => {
    const err = rejection(options);
    expect(err).toBeInstanceOf(InvalidOptionError);
    expect((err as InvalidOptionError).code).toBe('invalid_option');
    expect(err.message).toContain(name);
  });

  describe('dispatch', () => {
    const saved = process.env.CYCLONE_REDIS_URL;
    const withEnv = <T>(value: string | undefined, fn: () => T): T => {
      if (value === undefined) delete process.env.CYCLONE_REDIS_URL;
      else process.env.CYCLONE_REDIS_URL = value;
      try {
        return fn();
      } finally {
        if (saved === undefined) delete process.env.CYCLONE_REDIS_URL;
        else process.env.CYCLONE_REDIS_URL = saved;
      }
    };

    it('is off unless given, and applies the documented defaults when it is', () => {
      expect(resolveOptions({}).dispatch).toBeNull();
      expect(resolveOptions({ dispatch: { redis: { url: 'redis://cache:6379' } } }).dispatch).toEqual({
        redis: { url: 'redis://cache:6379', source: 'option' },
        shards: 1,
        maxDeliveries: 10,
        lostDispatchAfterMs: 600_000,
        whenRedisDown: 'claim',
      });
    });

    it('takes the URL from CYCLONE_REDIS_URL when the option leaves it out', () => {
      const resolved = withEnv('redis://from-env:6380/2', () => resolveOptions({ dispatch: { redis: {} } }));
      expect(resolved.dispatch?.redis).toEqual({ url: 'redis://from-env:6380/2', source: 'CYCLONE_REDIS_URL' });
    });

    it('refuses a missing or malformed URL, naming where it came from and never echoing it', () => {
      const missing = withEnv(undefined, () => rejection({ dispatch: { redis: {} } }));
      expect(missing).toBeInstanceOf(InvalidOptionError);
      expect(missing.message).toMatch(/dispatch\.redis\.url \(or CYCLONE_REDIS_URL\)/);
      const malformed = withEnv('postgres://user:s3cret@db:5432/app', () => rejection({ dispatch: { redis: {} } }));
      expect(malformed).toBeInstanceOf(InvalidOptionError);
      expect(malformed.message).toMatch(/CYCLONE_REDIS_URL must be a Redis URL/);
      expect(malformed.message).not.toMatch(/s3cret/);
    });

    it('refuses unknown keys, a client that is not a node-redis client, and values out of range', () => {
      expect(rejection({ dispatch: { redis: { url: 'redis://x' }, shard: 2 } })).toBeInstanceOf(InvalidOptionError);
      expect(rejection({ dispatch: { redis: { client: {} } } }).message).toMatch(/node-redis client/);
      expect(rejection({ dispatch: { redis: { url: 'redis://x', client: { duplicate() {} } } } }).message).toMatch(/not both/);
      expect(rejection({ dispatch: { redis: { url: 'redis://x' }, shards: 0 } }).message).toMatch(/dispatch\.shards/);
      expect(rejection({ dispatch: { redis: { url: 'redis://x' }, maxDeliveries: 0 } }).message).toMatch(/dispatch\.maxDeliveries/);
      expect(rejection({ dispatch: { redis: { url: 'redis://x' }, whenRedisDown: 'panic' } }).message).toMatch(
        /'claim' or 'wait'/,
      );
      expect(rejection({ dispatch: { redis: { url: 'redis://x' }, lostDispatchAfter: '10ms' } }).message).toMatch(
        /at least 1 s/,
      );
    });
  });
});
