/**
 * W5: crash. Worker processes run jobs whose handler writes a side effect keyed
 * by job, fenced by the job's token; one process is SIGKILLed every interval
 * and restarted at once. Afterwards: jobs lost, effects applied twice, extra
 * handler invocations, and how long a killed worker's jobs took to become
 * claimable again.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { percentile } from './lib/stats.js';
import { seed, sleep, type ChildContext } from './workloads.js';
import type { Runner, SystemName } from './runners/types.js';

export interface CrashParams {
  jobs: number;
  processes: number;
  /** Worker slots per process. */
  workersPerProcess: number;
  /** Handler duration. */
  jobMs: number;
  killEveryMs: number;
  /** Kills happen during this first part of the run; then the workers are left to finish. */
  killPhaseMs: number;
  /** End the run when nothing completed for this long after the kill phase. */
  stallMs: number;
  /** Hard limit of the whole run. */
  maxRunMs: number;
}

export interface CrashResult {
  system: SystemName;
  params: CrashParams;
  config: string;
  ok: boolean;
  error?: string;
  /** Why the run ended before every job completed. */
  ended?: string;
  kills: number;
  runMs: number;
  /** Time from spawning a worker process to its READY (boot of the system's client), p50 and max. */
  bootP50Ms: number;
  bootMaxMs: number;
  completed: number;
  lost: number;
  appliedTwice: number;
  extraInvocations: number;
  fencingRejected: number;
  /** Jobs held by killed workers, and how many of them became claimable within the run. */
  stranded: number;
  strandedFreed: number;
  killToClaimableP50Ms: number;
  killToClaimableP99Ms: number;
  killToClaimableMaxMs: number;
  claimableNote?: string;
}

const BENCH_TABLES = /* sql */ `
CREATE TABLE IF NOT EXISTS bench_invocations (
  run_id text NOT NULL, token bigint NOT NULL, pid int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE INDEX IF NOT EXISTS bench_invocations_run ON bench_invocations (run_id, at);
CREATE TABLE IF NOT EXISTS bench_effects (run_id text PRIMARY KEY, token bigint NOT NULL, applies int NOT NULL);
CREATE TABLE IF NOT EXISTS bench_rejects (run_id text NOT NULL, token bigint NOT NULL, pid int NOT NULL);
`;

/** Child: the engine's schema, the side-effect tables and the jobs. */
export async function crashSeed(runner: Runner, ctx: ChildContext, p: CrashParams): Promise<void> {
  const client = new pg.Client({ connectionString: ctx.url });
  await client.connect();
  await client.query(BENCH_TABLES);
  await client.end();
  await seed(runner, ctx.url, p.jobs, 10, true);
}

/** Child: one worker process of the crash test; prints READY <owner> and runs until SIGTERM. */
export async function crashWorker(runner: Runner, ctx: ChildContext, p: CrashParams): Promise<void> {
  const effects = new pg.Pool({ connectionString: ctx.url, max: p.workersPerProcess, application_name: 'bench-effects' });
  const handle = await runner.start({
    url: ctx.url,
    workers: p.workersPerProcess,
    poolSize: 10,
    crash: true,
    handler: async (_payload, meta) => {
      await effects.query('/* bench */ INSERT INTO bench_invocations (run_id, token, pid) VALUES ($1, $2, $3)', [
        meta.runId,
        meta.token,
        process.pid,
      ]);
      await sleep(p.jobMs);
      // The side effect, fenced: a write carrying a token not above the last accepted one is refused.
      const { rowCount } = await effects.query(
        `/* bench */ INSERT INTO bench_effects (run_id, token, applies) VALUES ($1, $2, 1)
         ON CONFLICT (run_id) DO UPDATE SET applies = bench_effects.applies + 1, token = EXCLUDED.token
          WHERE bench_effects.token < EXCLUDED.token`,
        [meta.runId, meta.token],
      );
      if (rowCount === 0) {
        await effects.query('/* bench */ INSERT INTO bench_rejects (run_id, token, pid) VALUES ($1, $2, $3)', [
          meta.runId,
          meta.token,
          process.pid,
        ]);
      }
    },
  });
  process.stdout.write(`READY ${handle.owner() ?? '-'}\n`);
  await new Promise<void>((resolve) => process.once('SIGTERM', () => resolve()));
  await handle.stop();
  await effects.end();
  process.exit(0);
}

interface Worker {
  proc: ChildProcess;
  pid: number;
  owner: string | null;
  ready: Promise<void>;
  isReady: boolean;
  spawnedAt: number;
  readyAt: number;
  exited: Promise<void>;
}

interface Stranded {
  killedAt: number;
  killedAtDate: Date;
  owner: string | null;
  open: Set<string>;
}

export interface CrashOrchestration {
  system: SystemName;
  runner: Runner;
  ctx: ChildContext;
  params: CrashParams;
  childScript: string;
  logPath: string;
  /** Runs a child task to completion (the seeding). */
  runChild(task: Record<string, unknown>): Promise<void>;
  log(line: string): void;
  /** Registers a spawned process so that the orchestrator can stop it on Ctrl-C. */
  track(proc: ChildProcess): void;
}

/** Orchestrator side of W5. */
export async function runCrash(o: CrashOrchestration): Promise<CrashResult> {
  const { params: p, runner } = o;
  await o.runChild({ mode: 'crash-seed', system: o.system, ctx: o.ctx, params: p });
  const logStream = createWriteStream(o.logPath, { flags: 'a' });
  const client = new pg.Client({ connectionString: o.ctx.url, application_name: 'bench' });
  await client.connect();

  const spawnWorker = (): Worker => {
    const proc = spawn(process.execPath, [o.childScript], {
      env: { ...process.env, BENCH_TASK: JSON.stringify({ mode: 'crash-worker', system: o.system, ctx: o.ctx, params: p }) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    o.track(proc);
    proc.stderr!.pipe(logStream, { end: false });
    const worker = { proc, pid: proc.pid!, owner: null, isReady: false, spawnedAt: performance.now(), readyAt: 0 } as unknown as Worker;
    worker.exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    worker.ready = new Promise<void>((resolve) => {
      createInterface({ input: proc.stdout! }).on('line', (line) => {
        logStream.write(`[${proc.pid}] ${line}\n`);
        const m = /^READY (.*)$/.exec(line);
        if (m) {
          worker.owner = m[1] === '-' ? null : m[1];
          worker.isReady = true;
          worker.readyAt = performance.now();
          boots.push(worker.readyAt - worker.spawnedAt);
          resolve();
        }
      });
    });
    return worker;
  };

  const boots: number[] = [];
  const workers: Worker[] = Array.from({ length: p.processes }, spawnWorker);
  await Promise.all(workers.map((w) => w.ready));
  o.log(`  W5 ${o.system}: ${p.processes} worker processes ready`);

  const strandedSets: Stranded[] = [];
  const freedAfter: number[] = [];
  let polling = true;
  const poller = (async () => {
    while (polling) {
      for (const s of strandedSets) {
        if (s.open.size === 0) continue;
        const freed = await runner.crash.freed(client, [...s.open], s.owner, s.killedAtDate);
        const at = performance.now();
        for (const id of freed) {
          if (s.open.delete(id)) freedAfter.push(at - s.killedAt);
        }
      }
      await sleep(25);
    }
  })();

  const t0 = performance.now();
  let kills = 0;
  let lastKill = t0;
  let pending = p.jobs;
  let lastProgress = performance.now();
  let lastPending = pending;
  let killing = true;
  let error: string | undefined;
  let ended: string | undefined;
  try {
    for (;;) {
      await sleep(100);
      pending = await runner.pending(client);
      const t = performance.now();
      if (pending < lastPending) {
        lastPending = pending;
        lastProgress = t;
      }
      if (pending === 0) break;
      if (t - t0 > p.maxRunMs) {
        error = `run limit of ${p.maxRunMs} ms reached with ${pending} jobs pending`;
        break;
      }
      if (!killing && t - lastProgress > p.stallMs) {
        ended = `no job finished for ${p.stallMs / 1000} s with ${pending} pending`;
        break;
      }
      if (killing && t - t0 > p.killPhaseMs) {
        killing = false;
        lastProgress = t;
      }
      if (killing && t - lastKill >= p.killEveryMs) {
        // The worker that has been up longest; a freshly restarted one may still be booting.
        const candidates = workers
          .map((w, k) => ({ w, k }))
          .filter(({ w }) => w.isReady)
          .sort((a, b) => a.w.readyAt - b.w.readyAt);
        if (candidates.length === 0) continue;
        const { k, w } = candidates[0];
        const killedAt = performance.now();
        const killedAtDate = new Date();
        w.proc.kill('SIGKILL');
        await w.exited;
        kills += 1;
        lastKill = killedAt;
        const held = await runner.crash.held(client, w.owner, w.pid);
        strandedSets.push({ killedAt, killedAtDate, owner: w.owner, open: new Set(held) });
        o.log(`  W5 ${o.system}: kill #${kills} pid ${w.pid}: ${held.length} jobs held, ${pending} pending`);
        workers[k] = spawnWorker();
      }
    }
  } finally {
    polling = false;
    await poller;
    await Promise.all(
      workers.map(async (w) => {
        w.proc.kill('SIGTERM');
        const timer = setTimeout(() => w.proc.kill('SIGKILL'), 15_000);
        await w.exited;
        clearTimeout(timer);
      }),
    );
    logStream.end();
  }
  const runMs = performance.now() - t0;
  const completed = await runner.completed(client, p.jobs);
  const q = async (sql: string) => Number((await client.query(sql)).rows[0].n);
  const invocations = await q('SELECT count(*) AS n FROM bench_invocations');
  const invokedRuns = await q('SELECT count(DISTINCT run_id) AS n FROM bench_invocations');
  const appliedTwice = await q('SELECT count(*) AS n FROM bench_effects WHERE applies > 1');
  const fencingRejected = await q('SELECT count(*) AS n FROM bench_rejects');
  await client.end();
  const stranded = strandedSets.reduce((a, s) => a + s.open.size, 0) + freedAfter.length;
  const measurable = runner.crash.measurable;
  return {
    system: o.system,
    params: p,
    config: runner.describe(p.workersPerProcess, 10, true),
    ok: error === undefined,
    ...(error ? { error } : {}),
    ...(ended ? { ended } : {}),
    kills,
    runMs,
    bootP50Ms: percentile(boots, 50),
    bootMaxMs: boots.length ? Math.max(...boots) : NaN,
    completed,
    lost: p.jobs - completed,
    appliedTwice,
    extraInvocations: invocations - invokedRuns,
    fencingRejected,
    stranded,
    strandedFreed: freedAfter.length,
    killToClaimableP50Ms: percentile(freedAfter, 50),
    killToClaimableP99Ms: percentile(freedAfter, 99),
    killToClaimableMaxMs: freedAfter.length ? Math.max(...freedAfter) : NaN,
    ...(measurable === true ? {} : { claimableNote: measurable }),
  };
}
