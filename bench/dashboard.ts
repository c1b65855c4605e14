/**
 * W9: the dashboard at scale. Fills Cyclone's tables with a million runs
 * made of what a week of a busy app leaves behind (mostly completed jobs of
 * a few kinds on a few queues, some failed, cancelled, queued, scheduled,
 * running and paused, some with unique keys, and workflow runs), vacuums and
 * analyses them, then serves the dashboard from a Nest HTTP app (Express, as
 * the example app) and times every call of its JSON API: the server's own
 * time from its Server-Timing header, and the round trip over loopback.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { CycloneModule } from 'cyclone-nestjs';
import { CycloneDashboardModule } from 'cyclone-nestjs/dashboard';
import { percentile } from './lib/stats.js';
import type { ChildContext } from './workloads.js';
import { totalBytesSql } from './lib/table-size.js';

export interface DashboardParams {
  rows: number;
  /** Timed calls of each API request, after WARMUP untimed ones. */
  samples: number;
}

export interface DashboardCall {
  name: string;
  path: string;
  /** Server time (Server-Timing), ms. */
  serverP50Ms: number;
  serverP95Ms: number;
  serverMaxMs: number;
  roundTripP50Ms: number;
  /** Runs the answer held (runs list), for the reader to see the filter matched something. */
  rows: number | null;
}

export interface DashboardResult {
  ok: boolean;
  error?: string;
  rows: number;
  seed: Record<string, number>;
  calls: DashboardCall[];
}

/** Every answer must come in under this, server time, at the 95th percentile. */
export const DASHBOARD_BUDGET_MS = 100;
const WARMUP = 3;

const KINDS = ['send_email', 'build_report', 'sync_crm', 'resize_image', 'charge_card', 'deliver_webhook', 'index_document', 'cleanup'];

export async function runDashboard(ctx: ChildContext, params: DashboardParams): Promise<DashboardResult> {
  const seed = await seedRuns(ctx.url, params.rows);
  const app = await startApp(ctx.url);
  try {
    const base = `${(await app.getUrl()).replace('[::1]', '127.0.0.1')}/cyclone/api`;
    const probes = await probeIds(ctx.url);
    const days = (n: number) => new Date(Date.now() - n * 86_400_000).toISOString();
    const requests: [string, string][] = [
      ['queues page', '/queues'],
      ['runs, first page', '/runs'],
      ['runs, state=failed', '/runs?state=failed'],
      ['runs, state=running', '/runs?state=running'],
      ['runs, state=cancelled', '/runs?state=cancelled'],
      ['runs, state=completed', '/runs?state=completed'],
      ['runs, kind=charge_card', '/runs?kind=charge_card'],
      ['runs, queue=media', '/runs?queue=media'],
      ['runs, a workflow by name', '/runs?kind=order_flow'],
      ['runs, queue+kind+state', '/runs?queue=reports&kind=build_report&state=failed'],
      ['runs, one day of seven', `/runs?from=${days(3)}&to=${days(2)}`],
      ['runs, failed in one day', `/runs?state=failed&from=${days(3)}&to=${days(2)}`],
      ['runs, search by run id', `/runs?q=${probes.middleRun}`],
      ['runs, search by unique key', `/runs?q=${encodeURIComponent(probes.oldKey)}`],
      ['runs, page deep in the history', `/runs?before=${probes.middleRun}`],
      ['runs, failed, deep page', `/runs?state=failed&before=${probes.middleFailed}`],
      ['runs, newer page from deep', `/runs?after=${probes.middleRun}`],
      ['runs, 200 a page', '/runs?limit=200'],
      ['a job run', `/runs/${probes.failedRun}`],
      ['a workflow run', `/runs/${probes.workflowRun}`],
      ['schedules', '/schedules'],
    ];
    const calls: DashboardCall[] = [];
    for (const [name, path] of requests) calls.push(await time(name, `${base}${path}`, params.samples));
    const slow = calls.filter((c) => c.serverP95Ms >= DASHBOARD_BUDGET_MS);
    return {
      ok: slow.length === 0,
      error: slow.length ? `over ${DASHBOARD_BUDGET_MS} ms: ${slow.map((c) => c.name).join(', ')}` : undefined,
      rows: params.rows,
      seed,
      calls,
    };
  } finally {
    await app.close();
  }
}

async function time(name: string, url: string, samples: number): Promise<DashboardCall> {
  const server: number[] = [];
  const roundTrip: number[] = [];
  let rows: number | null = null;
  for (let i = 0; i < WARMUP + samples; i++) {
    const t0 = performance.now();
    const response = await fetch(url);
    const body = (await response.json()) as { runs?: unknown[] };
    const elapsed = performance.now() - t0;
    if (!response.ok) throw new Error(`${name}: ${url} answered ${response.status}: ${JSON.stringify(body)}`);
    const timing = /dur=([\d.]+)/.exec(response.headers.get('server-timing') ?? '');
    if (!timing) throw new Error(`${name}: no Server-Timing header`);
    rows = Array.isArray(body.runs) ? body.runs.length : null;
    if (i < WARMUP) continue;
    server.push(Number(timing[1]));
    roundTrip.push(elapsed);
  }
  return {
    name,
    path: new URL(url).pathname.replace(/^.*\/api/, '') + new URL(url).search,
    serverP50Ms: percentile(server, 50),
    serverP95Ms: percentile(server, 95),
    serverMaxMs: Math.max(...server),
    roundTripP50Ms: percentile(roundTrip, 50),
    rows,
  };
}

/** The dashboard as an app mounts it, without workers, so the tables hold still while they are measured. */
async function startApp(url: string) {
  @Module({
    imports: [
      CycloneModule.forRoot({ connection: { url }, runWorkers: false }),
      CycloneDashboardModule.forRoot({ allowUnauthenticated: true }),
    ],
  })
  class DashboardBenchModule {}
  const app = await NestFactory.create(DashboardBenchModule, { logger: ['error', 'warn'] });
  await app.listen(0, '127.0.0.1');
  return app;
}

/**
 * The runs: created over the last seven days (ids are UUIDv7 of that time,
 * PostgreSQL 18's uuidv7(shift)), one step each, in these shares: 95 %
 * completed, 2 % failed, 1 % cancelled, 1 % queued and due, 0.5 % scheduled
 * for later, 0.1 % running, 0.4 % paused; a tenth with a unique key. Then
 * 1 % more as workflow runs of four nodes.
 */
async function seedRuns(url: string, rows: number): Promise<Record<string, number>> {
  // Boot once so the migrations create the schema.
  await (await startApp(url)).close();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const t0 = performance.now();
    const chunk = 200_000;
    const span = 7 * 86_400_000;
    for (let from = 1; from <= rows; from += chunk) {
      const to = Math.min(rows, from + chunk - 1);
      await client.query('BEGIN');
      await client.query(
        `WITH g AS (
           SELECT g, g % 1000 AS r,
                  ($3::bigint - g * $3::bigint / $2::bigint) * interval '1 millisecond' AS age,
                  ($4::text[])[1 + (g * 7) % 8] AS kind
             FROM generate_series($1::int, $5::int) AS g
         ), shaped AS (
           SELECT g, kind, age,
                  CASE kind WHEN 'send_email' THEN 'mail' WHEN 'build_report' THEN 'reports' WHEN 'resize_image' THEN 'media' ELSE 'default' END AS queue,
                  CASE WHEN r < 20 THEN 'failed' WHEN r < 30 THEN 'cancelled' WHEN r < 50 AND r >= 46 THEN 'paused'
                       WHEN r < 46 THEN 'running' ELSE 'completed' END AS run_state,
                  CASE WHEN r < 20 THEN 'discarded' WHEN r < 30 THEN 'cancelled' WHEN r < 40 THEN 'available'
                       WHEN r < 45 THEN 'scheduled' WHEN r = 45 THEN 'running' WHEN r < 50 THEN 'paused' ELSE 'completed' END AS step_state,
                  CASE WHEN g % 10 = 0 THEN 'key:' || kind || ':' || g END AS unique_key
             FROM g
         ), runs AS (
           INSERT INTO cyclone_runs (id, kind, state, queue, input, unique_key, retention, created_at, updated_at, finished_at, delete_after)
           SELECT uuidv7(-age), kind, run_state, queue, jsonb_build_object('n', g, 'to', 'user' || g || '@example.com'), unique_key,
                  interval '30 days', now() - age, now() - age + interval '2 seconds',
                  CASE WHEN run_state IN ('completed', 'failed', 'cancelled') THEN now() - age + interval '2 seconds' END,
                  CASE WHEN run_state IN ('completed', 'failed', 'cancelled') THEN now() - age + interval '30 days' END
             FROM shaped
           RETURNING id, kind, queue, created_at, input
         )
         INSERT INTO cyclone_steps (run_id, node_id, kind, queue, state, paused_state, attempt, max_attempts, scheduled_at,
                                    started_at, finished_at, heartbeat_at, lease_owner, lease_expiry, lease_generation,
                                    output, error, error_kind, created_at, updated_at)
         SELECT r.id, r.kind, r.kind, r.queue,
                CASE s.step_state WHEN 'scheduled' THEN 'available' ELSE s.step_state END,
                CASE WHEN s.step_state = 'paused' THEN 'available' END,
                CASE WHEN s.step_state = 'discarded' THEN 5 ELSE 1 END, 5,
                CASE WHEN s.step_state = 'scheduled' THEN now() + interval '1 hour' ELSE r.created_at END,
                CASE WHEN s.step_state IN ('completed', 'discarded', 'running') THEN r.created_at + interval '1 second' END,
                CASE WHEN s.step_state IN ('completed', 'discarded', 'cancelled') THEN r.created_at + interval '2 seconds' END,
                CASE WHEN s.step_state = 'running' THEN now() END,
                CASE WHEN s.step_state IN ('completed', 'discarded', 'running') THEN 'bench-worker' END,
                CASE WHEN s.step_state = 'running' THEN now() + interval '1 hour' END,
                CASE WHEN s.step_state IN ('completed', 'discarded', 'running') THEN 1 ELSE 0 END,
                CASE WHEN s.step_state = 'completed' THEN jsonb_build_object('ok', true, 'n', r.input->'n') END,
                CASE WHEN s.step_state = 'discarded' THEN 'Error: upstream answered 503 Service Unavailable' END,
                CASE WHEN s.step_state = 'discarded' THEN 'error' END,
                r.created_at, r.created_at + interval '2 seconds'
           FROM runs r JOIN shaped s ON s.g = (r.input->>'n')::int`,
        [from, rows, span, KINDS, to],
      );
      await client.query('COMMIT');
    }
    // Workflow runs: fetch → (score, enrich) → notify, mostly completed, some failed at score.
    const workflows = Math.max(10, Math.round(rows / 100));
    await client.query(
      `WITH runs AS (
         INSERT INTO cyclone_runs (id, workflow, state, queue, input, retention, created_at, updated_at, finished_at, delete_after)
         SELECT uuidv7(-(g * $2::bigint / $1::bigint) * interval '1 millisecond'), 'order_flow',
                CASE WHEN g % 50 = 0 THEN 'failed' ELSE 'completed' END, 'default', jsonb_build_object('order', g), interval '30 days',
                now() - (g * $2::bigint / $1::bigint) * interval '1 millisecond',
                now() - (g * $2::bigint / $1::bigint) * interval '1 millisecond' + interval '5 seconds',
                now() - (g * $2::bigint / $1::bigint) * interval '1 millisecond' + interval '5 seconds',
                now() + interval '30 days'
           FROM generate_series(1, $1::int) AS g
         RETURNING id, state, created_at
       )
       INSERT INTO cyclone_steps (run_id, node_id, kind, queue, state, depends_on, max_attempts, scheduled_at, started_at, finished_at,
                                  output, error, error_kind, created_at, updated_at)
       SELECT r.id, n.node, n.node || '_order', 'default',
              CASE WHEN r.state = 'failed' AND n.node = 'score' THEN 'discarded'
                   WHEN r.state = 'failed' AND n.node = 'notify' THEN 'pending' ELSE 'completed' END,
              n.after, 3, r.created_at, r.created_at + interval '1 second',
              CASE WHEN r.state = 'failed' AND n.node = 'notify' THEN NULL ELSE r.created_at + interval '4 seconds' END,
              CASE WHEN r.state = 'completed' THEN jsonb_build_object('node', n.node) END,
              CASE WHEN r.state = 'failed' AND n.node = 'score' THEN 'score service timed out' END,
              CASE WHEN r.state = 'failed' AND n.node = 'score' THEN 'timeout' END,
              r.created_at, r.created_at + interval '4 seconds'
         FROM runs r
        CROSS JOIN (VALUES ('fetch', '{}'::text[]), ('score', '{fetch}'), ('enrich', '{fetch}'), ('notify', '{score,enrich}')) AS n(node, after)`,
      [workflows, span],
    );
    const insertMs = performance.now() - t0;
    const t1 = performance.now();
    await client.query('VACUUM (ANALYZE) cyclone_runs, cyclone_steps');
    await client.query('CHECKPOINT');
    const vacuumMs = performance.now() - t1;
    const { rows: size } = await client.query(
      `SELECT (SELECT count(*) FROM cyclone_runs)::bigint AS runs, (SELECT count(*) FROM cyclone_steps)::bigint AS steps,
              ${totalBytesSql('cyclone_runs')} AS runs_bytes, ${totalBytesSql('cyclone_steps')} AS steps_bytes`,
    );
    return {
      runs: Number(size[0].runs),
      steps: Number(size[0].steps),
      insertMs,
      vacuumMs,
      runsBytes: Number(size[0].runs_bytes),
      stepsBytes: Number(size[0].steps_bytes),
    };
  } finally {
    await client.end();
  }
}

/** Ids to ask for: a run from the middle of the history, an old unique key, a failed run, a workflow run. */
async function probeIds(url: string): Promise<{ middleRun: string; middleFailed: string; oldKey: string; failedRun: string; workflowRun: string }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const one = async (text: string) => {
      const { rows } = await client.query(text);
      if (rows.length === 0) throw new Error(`no row for ${text}`);
      return String(rows[0].v);
    };
    return {
      middleRun: await one(`SELECT id AS v FROM cyclone_runs WHERE created_at < now() - interval '3 days 12 hours' ORDER BY id DESC LIMIT 1`),
      middleFailed: await one(
        `SELECT id AS v FROM cyclone_runs WHERE state = 'failed' AND created_at < now() - interval '3 days 12 hours' ORDER BY state, id DESC LIMIT 1`,
      ),
      oldKey: await one(`SELECT unique_key AS v FROM cyclone_runs WHERE unique_key IS NOT NULL AND created_at < now() - interval '6 days' ORDER BY unique_key LIMIT 1`),
      failedRun: await one(`SELECT id AS v FROM cyclone_runs WHERE state = 'failed' AND kind IS NOT NULL ORDER BY state, id DESC LIMIT 1`),
      workflowRun: await one(`SELECT id AS v FROM cyclone_runs WHERE workflow = 'order_flow' ORDER BY COALESCE(kind, workflow), id DESC LIMIT 1`),
    };
  } finally {
    await client.end();
  }
}
