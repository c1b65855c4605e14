import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Registry } from 'prom-client';
import { CycloneClient, CycloneModule, CycloneStats, Step, type StepContext } from 'cyclone-nestjs';
import { CycloneMetricsModule } from 'cyclone-nestjs/metrics';
import {
  JOB_KIND,
  REDIS_URL_ENV,
  cyclonePoolSize,
  type BenchPayload,
  type JobHandler,
  type Runner,
  type StartOptions,
  type SystemHandle,
} from './types.js';

/** Lease TTL of the crash test: a killed worker's steps come back after about this long. */
export const CRASH_LEASE_TTL = '5s';

/** The handler of the process; the step method forwards to it. */
let current: JobHandler | undefined;

/**
 * The bench step, with the limits of the run (W8: per key; W1L: kind-wide).
 * Made per start, since a step's limits are decorator options.
 */
function benchSteps(flow: StartOptions['flow'], retention: StartOptions['retention']) {
  const concurrency =
    flow?.perKey !== undefined
      ? { limit: flow.perKey, key: (input: BenchPayload) => input.key ?? '' }
      : flow?.kindLimit !== undefined
        ? { limit: flow.kindLimit }
        : undefined;
  @Injectable()
  class BenchSteps {
    @Step(JOB_KIND, { ...(concurrency ? { concurrency } : {}), ...(retention === undefined ? {} : { retention }) })
    async run(input: BenchPayload, ctx: StepContext): Promise<null> {
      await current?.(input, { runId: ctx.runId, token: ctx.fencingToken });
      return null;
    }
  }
  return BenchSteps;
}

/** plain: as a user would start it; observed: with metrics and spans; dispatched: with broker dispatch through Redis. */
type Variant = 'plain' | 'observed' | 'dispatched';

/** The bench's redis-server, which the orchestrator started and named in the environment. */
function redisUrl(): string {
  const url = process.env[REDIS_URL_ENV];
  if (!url) throw new Error(`Cyclone (Redis dispatch) needs ${REDIS_URL_ENV}: run the bench with --dispatch=redis`);
  return url;
}

/**
 * Starts a client. As a user would: one CycloneModule.forRoot with a URL, one
 * queue, defaults otherwise; tracing off, as it is for an app without
 * @opentelemetry/api (the repository has it installed). `observed` adds the
 * metrics module and turns spans on, with no SDK registered: the no-op tracer.
 * `dispatched` adds the dispatch option with its defaults (one shard).
 */
async function start(options: StartOptions, variant: Variant): Promise<SystemHandle> {
  current = options.handler;
  const workers = options.workers;
  const observed = variant === 'observed';
  @Module({
    imports: [
      CycloneModule.forRoot({
        connection: { url: options.url },
        ...(workers > 0 ? { queues: { default: { workers } } } : { runWorkers: false }),
        ...(options.crash ? { leaseTtl: CRASH_LEASE_TTL } : {}),
        ...(variant === 'dispatched' ? { dispatch: { redis: { url: redisUrl() } } } : {}),
        tracing: observed,
      }),
      ...(observed ? [CycloneMetricsModule.forRoot({ registry: new Registry() })] : []),
    ],
    providers: [benchSteps(options.flow, options.retention)],
  })
  class BenchModule {}

  const app = await NestFactory.createApplicationContext(BenchModule, { logger: ['error', 'warn'] });
  const client = app.get(CycloneClient);
  const stats = app.get(CycloneStats);
  return {
    enqueue: async (payload) => {
      await client.enqueue(JOB_KIND, payload);
    },
    enqueueMany: async (payloads) => {
      await client.enqueueMany(JOB_KIND, payloads);
    },
    owner: () => stats.clientId,
    stop: () => app.close(),
  };
}

export const runner: Runner = {
  system: 'cyclone',
  flowControl: true,
  describeFlow: (flow) => `@Step concurrency: { limit: ${flow.perKey}, key: (input) => input.key }`,
  describe: (workers, _pool, crash) =>
    workers > 0
      ? `CycloneModule.forRoot({ connection: { url }, queues: { default: { workers: ${workers} } }` +
        (crash ? `, leaseTtl: '${CRASH_LEASE_TTL}'` : '') +
        `, tracing: false }), defaults otherwise (pool ${cyclonePoolSize(workers)} connections + 1 LISTEN, poll [100 ms, 1 s), NOTIFY wake-ups); ` +
        `@Step handler; enqueue with CycloneClient.enqueue, bulk seed with enqueueMany`
      : `CycloneModule.forRoot({ connection: { url }, runWorkers: false, tracing: false }) (pool ${cyclonePoolSize(10)} connections); CycloneClient.enqueue`,
  start: (options) => start(options, 'plain'),
  pending: async (client) => {
    const { rows } = await client.query(
      // Two counts, each over its partial index (claim, lease), so the poll stays cheap however
      // large the history is; without one, W6 polled with a parallel scan of the history every 10 ms.
      // Available steps of kinds without limits and of limited kinds are indexed apart: one count each.
      `/* bench */ SELECT (SELECT count(*) FROM cyclone_steps
                           WHERE state = 'available' AND flow_key IS NULL AND queue = 'default' AND scheduled_at <= now())::int
                        + (SELECT count(*) FROM cyclone_steps
                           WHERE state = 'available' AND flow_key IS NOT NULL AND queue = 'default' AND scheduled_at <= now())::int
                        + (SELECT count(*) FROM cyclone_steps WHERE lease_expiry IS NOT NULL AND state = 'running')::int AS bench_n`,
    );
    return rows[0].bench_n;
  },
  completed: async (client) => {
    const { rows } = await client.query(`/* bench */ SELECT count(*)::int AS bench_n FROM cyclone_runs WHERE state = 'completed'`);
    return rows[0].bench_n;
  },
  crash: {
    measurable: true,
    held: async (client, owner) => {
      const { rows } = await client.query(
        `/* bench */ SELECT id::text AS bench_id FROM cyclone_steps WHERE state = 'running' AND lease_owner = $1`,
        [owner],
      );
      return rows.map((r) => r.bench_id);
    },
    freed: async (client, ids, owner) => {
      const { rows } = await client.query(
        `/* bench */ SELECT id::text AS bench_id FROM cyclone_steps
          WHERE id = ANY ($1::bigint[]) AND NOT (state = 'running' AND lease_owner IS NOT DISTINCT FROM $2)`,
        [ids, owner],
      );
      return rows.map((r) => r.bench_id);
    },
    listeners: async (client) => {
      const { rows } = await client.query(
        `/* bench */ SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'cyclone-listener'`,
      );
      return rows.map((r) => r.pid);
    },
    // OutcomeUnknownError carries the run ids: look them up.
    committed: async (client, ids) => {
      const { rows } = await client.query(`/* bench */ SELECT count(*)::int AS bench_n FROM cyclone_runs WHERE id = ANY ($1::uuid[])`, [ids]);
      return rows[0].bench_n;
    },
  },
};

/** Cyclone with observability on: the same client, plus CycloneMetricsModule and `tracing: true` (no SDK: the no-op tracer). */
export const observedRunner: Runner = {
  ...runner,
  system: 'cyclone-observed',
  describe: (workers, pool, crash) =>
    `${runner.describe(workers, pool, crash).replace('tracing: false', 'tracing: true')}; ` +
    'with CycloneMetricsModule.forRoot({ registry }) beside it and no OpenTelemetry SDK registered',
  start: (options) => start(options, 'observed'),
};

/**
 * Cyclone with broker dispatch: the same client with `dispatch: { redis: { url } }`
 * (defaults otherwise) on the bench's redis-server. Steps of kinds without a
 * concurrency limit reach the workers through the outbox and Redis Streams;
 * limited kinds are still claimed from PostgreSQL, so W8 and W1L would measure
 * plain Cyclone again and are not run.
 */
export const dispatchedRunner: Runner = {
  ...runner,
  system: 'cyclone-redis',
  flowControl: 'its limited kinds are claimed from PostgreSQL as without dispatch (the same path as Cyclone\'s W8)',
  describe: (workers, pool, crash) =>
    runner
      .describe(workers, pool, crash)
      .replace('tracing: false', 'dispatch: { redis: { url } }, tracing: false')
      .replace(
        'poll [100 ms, 1 s), NOTIFY wake-ups',
        "steps read from a Redis stream with XREADGROUP; the outbox publisher woken by each queue's wake-up, looking every 5 s when nothing woke it",
      ),
  start: (options) => start(options, 'dispatched'),
};
