/**
 * W10: the idle fleet (SPEC §17). Many Cyclone worker processes with nothing
 * to do, which is where polling costs the most: what they ask of PostgreSQL
 * a second while idle, how many connections they hold, and, once a batch of
 * jobs arrives, how fast they drain it. Run for plain Cyclone (every worker
 * polls the database) and for Cyclone with broker dispatch (workers block on
 * a Redis stream; only the outbox publisher polls), each on a fresh database
 * and, for dispatch, a fresh Redis.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { loadRunner } from './runners/load-runner.js';
import { cyclonePoolSize, type SystemName } from './runners/types.js';
import { sleep, type ChildContext } from './workloads.js';
import type { BenchRedis } from './lib/redis.js';

export interface FleetParams {
  processes: number;
  workersPerProcess: number;
  /** After every process is ready, before the idle window: start-up work (first recovery pass, first polls) is not idling. */
  settleMs: number;
  idleMs: number;
  jobs: number;
  /** Jobs per enqueueMany of the producer. */
  chunk: number;
  maxDrainMs: number;
}

export interface FleetResult {
  system: SystemName;
  params: FleetParams;
  config: string;
  ok: boolean;
  error?: string;
  rep?: number;
  /** From spawning the processes to the last one ready. */
  bootMs: number;
  idle: {
    /** The window's length as measured. */
    seconds: number;
    /** Top-level statements of the run's database a second (pg_stat_statements calls, delta over the window). */
    statementsPerSec: number;
    /** Transactions committed in the run's database a second (pg_stat_database xact_commit, delta over the window). */
    commitsPerSec: number;
    /** Connections to the run's database at the end of the window (pg_stat_activity), and the most seen during it. */
    connections: number;
    connectionsMax: number;
    /** The connections at the end of the window by application_name (cyclone: pools; cyclone-listener: LISTEN). */
    byApplication: Record<string, number>;
    /** Commands the Redis processed a second during the window (dispatch only). */
    redisCommandsPerSec?: number;
    /** The statements that made up the idle load, most calls first. */
    statements: { query: string; calls: number }[];
  };
  drain: {
    jobsPerSec: number;
    /** From the producer's signal to the database showing every job completed. */
    drainMs: number;
    /** How long the producer's enqueueMany calls took. */
    enqueueMs: number;
    /** The most connections to the run's database seen during the drain. */
    connectionsMax: number;
  };
  /** Jobs each worker process ran: how evenly the drain spread over the fleet. */
  handledPerProcess: { min: number; max: number };
  errors: number;
  warnings: number;
}

/** Child: one worker process of the fleet; prints READY, and HANDLED <n> on SIGTERM before it stops. */
export async function fleetWorker(system: SystemName, ctx: ChildContext, p: FleetParams): Promise<void> {
  let handled = 0;
  const handle = await (await loadRunner(system)).start({
    url: ctx.url,
    workers: p.workersPerProcess,
    poolSize: cyclonePoolSize(p.workersPerProcess),
    handler: () => {
      handled += 1;
    },
  });
  process.stdout.write('READY\n');
  await new Promise<void>((resolve) => process.once('SIGTERM', () => resolve()));
  process.stdout.write(`HANDLED ${handled}\n`);
  await handle.stop();
}

/** Child: the producer; enqueues the jobs with enqueueMany once it gets SIGUSR2, prints ENQUEUED <ms>, stops on SIGTERM. */
export async function fleetProducer(system: SystemName, ctx: ChildContext, p: FleetParams): Promise<void> {
  const handle = await (await loadRunner(system)).start({ url: ctx.url, workers: 0, poolSize: cyclonePoolSize(10) });
  const go = new Promise<void>((resolve) => process.once('SIGUSR2', () => resolve()));
  process.stdout.write('READY\n');
  await go;
  const t0 = performance.now();
  for (let i = 0; i < p.jobs; i += p.chunk) {
    await handle.enqueueMany(Array.from({ length: Math.min(p.chunk, p.jobs - i) }, (_, k) => ({ i: i + k })));
  }
  process.stdout.write(`ENQUEUED ${performance.now() - t0}\n`);
  await new Promise<void>((resolve) => process.once('SIGTERM', () => resolve()));
  await handle.stop();
}

export interface FleetOrchestration {
  system: SystemName;
  ctx: ChildContext;
  params: FleetParams;
  childScript: string;
  logPath: string;
  /** The bench's Redis, to count its commands while the fleet idles (dispatch). */
  redis?: BenchRedis;
  log(line: string): void;
  track(proc: ChildProcess): void;
  describe: string;
}

interface Child {
  proc: ChildProcess;
  ready: Promise<void>;
  exited: Promise<void>;
  handled?: number;
  enqueueMs?: number;
}

/** Top-level statement calls of the database so far, per statement (the bench's own left out). */
async function statementCalls(admin: pg.Client, database: string): Promise<Map<string, { query: string; calls: number }>> {
  const { rows } = await admin.query(
    `/* bench */ SELECT s.queryid::text AS id, s.query, s.calls::bigint AS calls
       FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
      WHERE d.datname = $1 AND s.toplevel AND s.query NOT ILIKE '%bench%'`,
    [database],
  );
  return new Map(rows.map((r) => [r.id as string, { query: String(r.query).replace(/\s+/g, ' ').slice(0, 200), calls: Number(r.calls) }]));
}

async function commits(admin: pg.Client, database: string): Promise<number> {
  const { rows } = await admin.query('/* bench */ SELECT xact_commit::bigint AS n FROM pg_stat_database WHERE datname = $1', [database]);
  return Number(rows[0].n);
}

/** The run's database's connections by application_name, the bench's own left out. */
async function connections(admin: pg.Client, database: string): Promise<Record<string, number>> {
  const { rows } = await admin.query(
    `/* bench */ SELECT COALESCE(NULLIF(application_name, ''), '(none)') AS app, count(*)::int AS n
       FROM pg_stat_activity WHERE datname = $1 AND application_name <> 'bench' GROUP BY 1 ORDER BY 2 DESC`,
    [database],
  );
  return Object.fromEntries(rows.map((r) => [r.app as string, r.n as number]));
}

const total = (byApp: Record<string, number>) => Object.values(byApp).reduce((a, b) => a + b, 0);

/** Orchestrator side of W10, for one system (plain Cyclone or Cyclone with dispatch) on a fresh database. */
export async function runFleet(o: FleetOrchestration): Promise<FleetResult> {
  const p = o.params;
  const logStream = createWriteStream(o.logPath, { flags: 'a' });
  let errors = 0;
  let warnings = 0;
  const spawnChild = (mode: 'fleet-worker' | 'fleet-producer'): Child => {
    const proc = spawn(process.execPath, [o.childScript], {
      env: { ...process.env, BENCH_TASK: JSON.stringify({ mode, system: o.system, ctx: o.ctx, params: p }) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    o.track(proc);
    const child: Child = { proc } as Child;
    // What the processes log (errors and warnings only) goes to the log, and is counted for the report.
    createInterface({ input: proc.stderr! }).on('line', (line) => {
      if (/\bERROR\b/.test(line)) errors += 1;
      else if (/\bWARN\b/.test(line)) warnings += 1;
      logStream.write(`[${mode} ${proc.pid}] ${line}\n`);
    });
    child.exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    child.ready = new Promise<void>((resolve, reject) => {
      void child.exited.then(() => reject(new Error(`${mode} ${proc.pid} exited (see ${o.logPath})`)));
      createInterface({ input: proc.stdout! }).on('line', (line) => {
        if (line === 'READY') resolve();
        else if (line.startsWith('HANDLED ')) child.handled = Number(line.slice('HANDLED '.length));
        else if (line.startsWith('ENQUEUED ')) child.enqueueMs = Number(line.slice('ENQUEUED '.length));
        else logStream.write(`[${mode} ${proc.pid}] ${line}\n`);
      });
    });
    child.ready.catch(() => undefined);
    return child;
  };

  // Every measurement goes through the admin database, so that none of it counts as the fleet's.
  const admin = new pg.Client({ connectionString: o.ctx.adminUrl, application_name: 'bench' });
  await admin.connect();
  const check = new pg.Client({ connectionString: o.ctx.url, application_name: 'bench' });
  const workers: Child[] = [];
  let producer: Child | undefined;
  try {
    const t0 = performance.now();
    // The first process migrates; the others start on the migrated schema.
    workers.push(spawnChild('fleet-worker'));
    await workers[0].ready;
    for (let k = 1; k < p.processes; k++) workers.push(spawnChild('fleet-worker'));
    await Promise.all(workers.map((w) => w.ready));
    const bootMs = performance.now() - t0;
    o.log(
      `  W10 ${o.system}: ${p.processes} processes × ${p.workersPerProcess} workers ready in ${(bootMs / 1000).toFixed(1)} s; ` +
        `idle for ${p.idleMs / 1000} s`,
    );
    await sleep(p.settleMs);

    // The idle window: nothing but the fleet touches the run's database.
    const counters = async () => ({
      statements: await statementCalls(admin, o.ctx.database),
      commits: await commits(admin, o.ctx.database),
      redis: await o.redis?.commandsProcessed(),
    });
    const before = await counters();
    const idleStart = performance.now();
    let idleMax = 0;
    while (performance.now() - idleStart < p.idleMs) {
      await sleep(Math.min(1_000, p.idleMs - (performance.now() - idleStart)));
      idleMax = Math.max(idleMax, total(await connections(admin, o.ctx.database)));
    }
    const after = await counters();
    const idleSeconds = (performance.now() - idleStart) / 1000;
    const held = await connections(admin, o.ctx.database);
    const idleStatements = [...after.statements].map(([id, s]) => ({
      query: s.query,
      calls: s.calls - (before.statements.get(id)?.calls ?? 0),
    }));
    const statementsPerSec = idleStatements.reduce((n, s) => n + s.calls, 0) / idleSeconds;
    const idle: FleetResult['idle'] = {
      seconds: idleSeconds,
      statementsPerSec,
      commitsPerSec: (after.commits - before.commits) / idleSeconds,
      connections: total(held),
      connectionsMax: Math.max(idleMax, total(held)),
      byApplication: held,
      ...(before.redis !== undefined && after.redis !== undefined
        ? { redisCommandsPerSec: (after.redis - before.redis) / idleSeconds }
        : {}),
      statements: idleStatements
        .filter((s) => s.calls > 0)
        .sort((a, b) => b.calls - a.calls)
        .slice(0, 8),
    };
    o.log(
      `  W10 ${o.system} idle: ${statementsPerSec.toFixed(1)} statements/s, ${idle.commitsPerSec.toFixed(1)} commits/s, ` +
        `${idle.connections} connections` +
        (idle.redisCommandsPerSec !== undefined ? `, Redis ${idle.redisCommandsPerSec.toFixed(1)} commands/s` : ''),
    );

    // The drain: a producer of its own enqueues the jobs in batches while the fleet runs them.
    producer = spawnChild('fleet-producer');
    await producer.ready;
    await check.connect();
    let drainMax = 0;
    const drainStart = performance.now();
    producer.proc.kill('SIGUSR2');
    let completed = 0;
    let lastSample = 0;
    while (completed < p.jobs) {
      if (performance.now() - drainStart > p.maxDrainMs) {
        throw new Error(`drain limit of ${p.maxDrainMs} ms reached with ${completed} of ${p.jobs} completed`);
      }
      await sleep(50);
      completed = Number((await check.query(`/* bench */ SELECT count(*)::int AS n FROM cyclone_runs WHERE state = 'completed'`)).rows[0].n);
      if (performance.now() - lastSample > 250) {
        lastSample = performance.now();
        drainMax = Math.max(drainMax, total(await connections(admin, o.ctx.database)));
      }
    }
    const drainMs = performance.now() - drainStart;
    await stopAll(workers, producer);
    const handled = workers.map((w) => w.handled ?? NaN);
    const result: FleetResult = {
      system: o.system,
      params: p,
      config: o.describe,
      ok: true,
      bootMs,
      idle,
      drain: { jobsPerSec: p.jobs / (drainMs / 1000), drainMs, enqueueMs: producer.enqueueMs ?? NaN, connectionsMax: drainMax },
      handledPerProcess: { min: Math.min(...handled), max: Math.max(...handled) },
      errors,
      warnings,
    };
    o.log(
      `  W10 ${o.system} drain: ${result.drain.jobsPerSec.toFixed(0)} jobs/s (${(drainMs / 1000).toFixed(1)} s), ` +
        `up to ${drainMax} connections, ${result.handledPerProcess.min}–${result.handledPerProcess.max} jobs a process, ` +
        `${errors} errors, ${warnings} warnings logged`,
    );
    return result;
  } finally {
    await stopAll(workers, producer);
    await check.end().catch(() => undefined);
    await admin.end();
    logStream.end();
  }
}

/** SIGTERM to every process still running (the workers hand back and report what they ran), SIGKILL after 30 s. */
async function stopAll(workers: Child[], producer?: Child): Promise<void> {
  const all = producer ? [...workers, producer] : workers;
  await Promise.all(
    all.map(async (c) => {
      if (c.proc.exitCode !== null || c.proc.signalCode !== null) return;
      c.proc.kill('SIGTERM');
      const timer = setTimeout(() => c.proc.kill('SIGKILL'), 30_000);
      await c.exited;
      clearTimeout(timer);
    }),
  );
}
