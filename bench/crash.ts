/**
 * W5: crash. Worker processes run jobs whose handler writes a side effect keyed
 * by job, fenced by the job's token; one process is SIGKILLed every interval
 * and restarted at once. With `faults`, the database fails too during the
 * kill phase: every LISTEN backend of the system is terminated, and the
 * server is crashed (an immediate shutdown) and started again, while a
 * producer process enqueues jobs one by one through it all. Afterwards: jobs
 * lost, unfinished, effects applied twice, extra handler invocations, how
 * long a killed worker's jobs took to become claimable again, what the
 * producer's callers were told, and how long the system took to drain once
 * the server was back.
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
  /** Handler duration; with `jobMsMax`, the shortest of a uniform spread up to it. */
  jobMs: number;
  jobMsMax?: number;
  killEveryMs: number;
  /** Kills happen during this first part of the run; then the workers are left to finish. */
  killPhaseMs: number;
  /** End the run when nothing completed for this long after the kill phase. */
  stallMs: number;
  /** Hard limit of the whole run. */
  maxRunMs: number;
  /** Jobs enqueued one at a time during the run by a producer process of their own, one every `intervalMs`. */
  produce?: { jobs: number; intervalMs: number };
  /**
   * Database faults, in ms from the start of the run: the system's LISTEN
   * backends terminated at `listenKillAtMs`; the server crashed at
   * `restartAtMs` and started again `downMs` later.
   */
  faults?: { listenKillAtMs: number; restartAtMs: number; downMs: number };
}

/** What the producer's callers were told, enqueue by enqueue. */
export interface ProducerReport {
  attempted: number;
  ok: number;
  /** Refused enqueues by error (class and code). */
  refused: Record<string, number>;
  /** Ids carried by errors that left the outcome unknown (Cyclone's OutcomeUnknownError). */
  unknownIds: string[];
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
  /** Jobs the system had accepted that neither completed nor are waiting any more. */
  lost: number;
  /** Jobs still queued or running when the run ended. */
  unfinished: number;
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
  /** Worker processes that exited without being killed (the system did not survive a fault). */
  workerExits: number;
  produced?: ProducerReport & { refusedButCommitted: number | null };
  faults?: { listenersKilled: number; serverDownMs: number; serverStartMs: number; drainAfterServerBackMs: number | null };
  /** The producer's jobs: from the enqueue call to the first call of their handler, through the kills and the faults. */
  pickup?: {
    jobs: number;
    p50Ms: number;
    p95Ms: number;
    p99Ms: number;
    maxMs: number;
    /** By when the job was sent, in windows of killEveryMs from the producer's first send. */
    windows: { fromMs: number; p50Ms: number; maxMs: number; jobs: number }[];
  };
}

const BENCH_TABLES = /* sql */ `
CREATE TABLE IF NOT EXISTS bench_invocations (
  run_id text NOT NULL, token bigint NOT NULL, pid int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp(),
  sent_at double precision);
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
  // An idle connection the server's crash ends is reported here; the handler's next query gets a new one.
  effects.on('error', () => undefined);
  const handle = await runner.start({
    url: ctx.url,
    workers: p.workersPerProcess,
    poolSize: 10,
    crash: true,
    handler: async (payload, meta) => {
      // The handler's first line: when a produced job was picked up (the producer's clock is this machine's).
      const startedAt = wallClock();
      await effects.query(
        '/* bench */ INSERT INTO bench_invocations (run_id, token, pid, at, sent_at) VALUES ($1, $2, $3, to_timestamp($4 / 1000.0), $5)',
        [meta.runId, meta.token, process.pid, startedAt, payload.sentAt ?? null],
      );
      await sleep(p.jobMsMax === undefined ? p.jobMs : p.jobMs + Math.random() * (p.jobMsMax - p.jobMs));
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

/** Child: the producer of W5's faults run: one enqueue at a time, paced, through whatever happens to the database. */
export async function crashProducer(runner: Runner, ctx: ChildContext, p: CrashParams): Promise<void> {
  const produce = p.produce!;
  const handle = await runner.start({ url: ctx.url, workers: 0, poolSize: 10, crash: true });
  let stopping = false;
  process.once('SIGTERM', () => (stopping = true));
  process.stdout.write('READY -\n');
  const report: ProducerReport = { attempted: 0, ok: 0, refused: {}, unknownIds: [] };
  // A steady rate: each enqueue at its time; one that ran late (the database away) moves the
  // schedule on rather than leaving a burst to catch up with.
  let due = performance.now();
  for (let i = 0; i < produce.jobs && !stopping; i++) {
    report.attempted += 1;
    try {
      await handle.enqueue({ i: p.jobs + i, sentAt: wallClock() });
      report.ok += 1;
    } catch (err) {
      const key = errorKey(err);
      report.refused[key] = (report.refused[key] ?? 0) + 1;
      const ids = (err as { runIds?: unknown }).runIds;
      if (Array.isArray(ids)) report.unknownIds.push(...ids.map(String));
    }
    due = Math.max(due + produce.intervalMs, performance.now());
    await sleep(due - performance.now());
  }
  process.stdout.write(`RESULT ${JSON.stringify(report)}\n`);
  await handle.stop().catch(() => undefined);
}

/** Epoch milliseconds, with the monotonic clock's resolution. */
const wallClock = () => performance.timeOrigin + performance.now();

/** An error as the producer's report counts it: its class and its code, else the start of its message. */
function errorKey(err: unknown): string {
  const { name, code, message } = (err ?? {}) as { name?: unknown; code?: unknown; message?: unknown };
  const what = typeof code === 'string' ? code : typeof message === 'string' ? message.slice(0, 60) : String(err);
  return `${typeof name === 'string' ? name : 'Error'}: ${what}`;
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
  /** Set before the orchestrator kills it: an exit without it is the process's own. */
  killed: boolean;
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
  /** The server, for `faults`. */
  server?: { crashRestart(downMs: number): Promise<{ downMs: number; startMs: number }> };
}

/** Orchestrator side of W5. */
export async function runCrash(o: CrashOrchestration): Promise<CrashResult> {
  const { params: p, runner } = o;
  await o.runChild({ mode: 'crash-seed', system: o.system, ctx: o.ctx, params: p });
  const logStream = createWriteStream(o.logPath, { flags: 'a' });
  // A pool, not one client: it reconnects after the server's restart.
  const pool = new pg.Pool({ connectionString: o.ctx.url, application_name: 'bench', max: 3 });
  pool.on('error', () => undefined);
  const client = pool as unknown as pg.ClientBase;
  let workerExits = 0;

  const spawnChild = (mode: string): ChildProcess => {
    const proc = spawn(process.execPath, [o.childScript], {
      env: { ...process.env, BENCH_TASK: JSON.stringify({ mode, system: o.system, ctx: o.ctx, params: p }) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    o.track(proc);
    proc.stderr!.pipe(logStream, { end: false });
    return proc;
  };

  const spawnWorker = (): Worker => {
    const proc = spawnChild('crash-worker');
    const worker = { proc, pid: proc.pid!, owner: null, isReady: false, spawnedAt: performance.now(), readyAt: 0, killed: false } as unknown as Worker;
    worker.exited = new Promise<void>((resolve) =>
      proc.once('exit', (code, signal) => {
        if (!worker.killed) {
          workerExits += 1;
          logStream.write(`[${proc.pid}] exited on its own (code ${code}, signal ${signal})\n`);
        }
        resolve();
      }),
    );
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

  // The producer: one enqueue at a time through the whole run; its report comes on its stdout at the end.
  let producerReport: ProducerReport | undefined;
  let producerDone = !p.produce;
  let producer: ChildProcess | undefined;
  let producerExited: Promise<void> = Promise.resolve();
  if (p.produce) {
    producer = spawnChild('crash-producer');
    producerExited = new Promise<void>((resolve) => producer!.once('exit', () => resolve()));
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: producer!.stdout! }).on('line', (line) => {
        logStream.write(`[producer ${producer!.pid}] ${line}\n`);
        if (line.startsWith('READY')) resolve();
        if (line.startsWith('RESULT ')) {
          producerReport = JSON.parse(line.slice('RESULT '.length)) as ProducerReport;
          producerDone = true;
        }
      });
      producer!.once('exit', () => {
        producerDone = true;
        reject(new Error('the producer exited before it was ready'));
      });
    });
  }
  let listenersKilled = 0;
  let listenDone = !p.faults;
  let restart: Promise<void> | undefined;
  let serverDown: { at: number; upAt?: number; downMs?: number; startMs?: number } | undefined;
  let drainedAt: number | undefined;

  const strandedSets: Stranded[] = [];
  const freedAfter: number[] = [];
  let polling = true;
  const poller = (async () => {
    while (polling) {
      for (const s of strandedSets) {
        if (s.open.size === 0) continue;
        let freed: string[];
        try {
          freed = await runner.crash.freed(client, [...s.open], s.owner, s.killedAtDate);
        } catch {
          // The server is down: look again once it is back.
          continue;
        }
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
  let previousPending = pending;
  let killing = true;
  let error: string | undefined;
  let ended: string | undefined;
  try {
    for (;;) {
      await sleep(100);
      const t = performance.now();
      if (p.faults && !listenDone && t - t0 >= p.faults.listenKillAtMs) {
        listenDone = true;
        const pids = await runner.crash.listeners(client);
        for (const pid of pids) await pool.query('SELECT pg_terminate_backend($1)', [pid]);
        listenersKilled = pids.length;
        o.log(`  W5 ${o.system}: terminated ${pids.length} LISTEN backend(s)`);
      }
      if (p.faults && o.server && !restart && t - t0 >= p.faults.restartAtMs) {
        serverDown = { at: t };
        o.log(`  W5 ${o.system}: crashing the server for ${p.faults.downMs} ms`);
        restart = o.server.crashRestart(p.faults.downMs).then((r) => {
          Object.assign(serverDown!, { upAt: performance.now(), ...r });
          // Nothing could finish while the server was down: the stall clock starts again.
          lastProgress = performance.now();
          o.log(`  W5 ${o.system}: server back after ${r.downMs} ms down (start ${r.startMs} ms)`);
        });
      }
      const down = serverDown !== undefined && serverDown.upAt === undefined;
      try {
        pending = await runner.pending(client);
      } catch {
        // The server is down or restarting.
        continue;
      }
      // Fewer pending than at the sample before: a job finished. (Not a new
      // low: while the producer adds jobs as fast as they are run, pending
      // stays level and would look stalled.)
      if (pending < previousPending) lastProgress = t;
      previousPending = pending;
      if (pending === 0 && producerDone && !down && (!p.faults || restart !== undefined)) {
        drainedAt = t;
        break;
      }
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
      // No kills while the server is down, nor just after: the faults stay apart.
      const nearOutage = serverDown !== undefined && (serverDown.upAt === undefined || t - serverDown.upAt < 2_000);
      if (killing && !nearOutage && t - lastKill >= p.killEveryMs) {
        // The worker that has been up longest; a freshly restarted one may still be booting.
        const candidates = workers
          .map((w, k) => ({ w, k }))
          .filter(({ w }) => w.isReady)
          .sort((a, b) => a.w.readyAt - b.w.readyAt);
        if (candidates.length === 0) continue;
        const { k, w } = candidates[0];
        const killedAt = performance.now();
        const killedAtDate = new Date();
        w.killed = true;
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
    await restart;
    if (producer && !producerDone) producer.kill('SIGTERM');
    await producerExited;
    await Promise.all(
      workers.map(async (w) => {
        w.killed = true;
        w.proc.kill('SIGTERM');
        const timer = setTimeout(() => w.proc.kill('SIGKILL'), 15_000);
        await w.exited;
        clearTimeout(timer);
      }),
    );
    logStream.end();
  }
  const runMs = performance.now() - t0;
  const q = async (sql: string) => Number((await client.query(sql)).rows[0].n);
  // What the system had accepted: the seeded jobs, the enqueues that returned, and those refused that committed anyway.
  const refusedButCommitted =
    producerReport && runner.crash.committed ? await runner.crash.committed(client, producerReport.unknownIds) : null;
  const accepted = p.jobs + (producerReport?.ok ?? 0) + (refusedButCommitted ?? 0);
  const completed = await runner.completed(client, accepted);
  const unfinished = await runner.pending(client);
  const invocations = await q('SELECT count(*) AS n FROM bench_invocations');
  const invokedRuns = await q('SELECT count(DISTINCT run_id) AS n FROM bench_invocations');
  const appliedTwice = await q('SELECT count(*) AS n FROM bench_effects WHERE applies > 1');
  const fencingRejected = await q('SELECT count(*) AS n FROM bench_rejects');
  const { rows: pickups } = await client.query<{ ms: number }>(
    `SELECT extract(epoch FROM min(at)) * 1000 - min(sent_at) AS ms FROM bench_invocations
      WHERE sent_at IS NOT NULL GROUP BY run_id`,
  );
  const pickupMs = pickups.map((r) => Number(r.ms));
  // The same waits by when the job was sent, in windows of the kill interval: where in the run they grew.
  const { rows: windows } = await client.query<{ window: number; p50: number; max: number; jobs: number }>(
    `WITH firsts AS (
       SELECT min(sent_at) AS sent_at, extract(epoch FROM min(at)) * 1000 - min(sent_at) AS ms
         FROM bench_invocations WHERE sent_at IS NOT NULL GROUP BY run_id)
     SELECT floor((sent_at - (SELECT min(sent_at) FROM firsts)) / $1)::int AS window,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50, max(ms) AS max, count(*)::int AS jobs
       FROM firsts GROUP BY 1 ORDER BY 1`,
    [p.killEveryMs],
  );
  await pool.end();
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
    lost: Math.max(0, accepted - completed - unfinished),
    unfinished,
    appliedTwice,
    extraInvocations: invocations - invokedRuns,
    fencingRejected,
    stranded,
    strandedFreed: freedAfter.length,
    killToClaimableP50Ms: percentile(freedAfter, 50),
    killToClaimableP99Ms: percentile(freedAfter, 99),
    killToClaimableMaxMs: freedAfter.length ? Math.max(...freedAfter) : NaN,
    ...(measurable === true ? {} : { claimableNote: measurable }),
    workerExits,
    ...(producerReport ? { produced: { ...producerReport, unknownIds: [], refusedButCommitted } } : {}),
    ...(pickupMs.length > 0
      ? {
          pickup: {
            jobs: pickupMs.length,
            p50Ms: percentile(pickupMs, 50),
            p95Ms: percentile(pickupMs, 95),
            p99Ms: percentile(pickupMs, 99),
            maxMs: Math.max(...pickupMs),
            windows: windows.map((w) => ({ fromMs: w.window * p.killEveryMs, p50Ms: Number(w.p50), maxMs: Number(w.max), jobs: w.jobs })),
          },
        }
      : {}),
    ...(p.faults
      ? {
          faults: {
            listenersKilled,
            serverDownMs: serverDown?.downMs ?? NaN,
            serverStartMs: serverDown?.startMs ?? NaN,
            drainAfterServerBackMs:
              drainedAt !== undefined && serverDown?.upAt !== undefined ? drainedAt - serverDown.upAt : null,
          },
        }
      : {}),
  };
}
