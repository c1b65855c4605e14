/**
 * The workloads of SPEC §9, written once against the Runner interface so that
 * every system is measured by the same code. They run inside a child process
 * (child.ts), one workload of one system per process, on a fresh database.
 */
import pg from 'pg';
import {
  cpuMark,
  cpuSplit,
  dbCounters,
  resetStatements,
  topStatements,
  walBytesBetween,
  WaitSampler,
  type CpuMark,
  type CpuSplit,
  type StatementStat,
} from './lib/diagnostics.js';
import { percentile } from './lib/stats.js';
import { cyclonePoolSize, type BenchPayload, type JobHandler, type Runner, type StartOptions } from './runners/types.js';

export type WorkloadName = 'W1' | 'W2' | 'W3' | 'W4' | 'W8' | 'W1L' | 'W1R0';

export interface ChildContext {
  url: string;
  database: string;
  adminUrl: string;
  dataDir: string;
}

export interface WorkloadParams {
  /** W1, W4: jobs; W2: enqueues; W3: jobs sent. */
  jobs: number;
  /** Worker slots (W1, W3, W4). */
  workers: number;
  /** Concurrent callers (W2) or producers (W4). */
  callers: number;
  /** W3: ms between sends. */
  intervalMs: number;
  /** W4: handler duration. */
  jobMs: number;
  /** Give up after this long. */
  timeoutMs: number;
  /** W8: keys the jobs are spread over, and the per-key concurrency limit. */
  keys?: number;
  perKey?: number;
  /** W1L: the kind-wide concurrency limit (set far above the workers, so it never binds). */
  kindLimit?: number;
}

export interface Diagnostics {
  cpu?: CpuSplit;
  /** Transactions committed in the run's database per job, read-only ones (NOTIFY delivery, SELECTs) included. */
  commitsPerJob?: number;
  walBytesPerJob?: number;
  /** WAL fsyncs of the server per job. */
  walFsyncsPerJob?: number;
  /** Average active backends of the run's database per wait event during the measured phase ('CPU' = not waiting). */
  waits?: Record<string, number>;
  statements?: StatementStat[];
}

export interface WorkloadResult {
  system: string;
  workload: WorkloadName;
  params: WorkloadParams;
  config: string;
  ok: boolean;
  error?: string;
  /** Figures of the run; the headline one is named by the report. */
  values: Record<string, number>;
  diagnostics: Diagnostics;
  /** Which repetition of the run it was (1-based), set by the run loop. */
  rep?: number;
}

const now = () => performance.now();
/** Wall clock with sub-millisecond resolution, comparable across the producer and the handler of one process. */
const wallNow = () => performance.timeOrigin + performance.now();
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

class Latch {
  count = 0;
  private waiters: { target: number; resolve: () => void }[] = [];
  hit(): void {
    this.count += 1;
    this.waiters = this.waiters.filter((w) => {
      if (this.count >= w.target) {
        w.resolve();
        return false;
      }
      return true;
    });
  }
  reached(target: number, timeoutMs: number, what: string): Promise<void> {
    if (this.count >= target) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}: ${this.count}/${target}`)),
        timeoutMs,
      );
      this.waiters.push({
        target,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string, everyMs = 10): Promise<void> {
  const deadline = now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Commit count, WAL position and statement statistics around the measured phase. */
class Probe {
  private before?: { commits: number; walLsn: string; walFsyncs: number };
  private cpuA?: CpuMark;
  private cpuB?: CpuMark;
  private sampler?: WaitSampler;
  private sampling?: Promise<void>;
  private waits?: Record<string, number>;
  constructor(
    private readonly admin: pg.Client,
    private readonly ctx: ChildContext,
  ) {}

  /** Call while nothing else runs against the database (stats of exited backends are flushed). */
  async begin(): Promise<void> {
    await sleep(250);
    this.before = await dbCounters(this.admin, this.ctx.database);
    await resetStatements(this.admin);
  }
  markStart(): void {
    this.cpuA = cpuMark(this.ctx.dataDir);
    this.sampling = (async () => {
      const client = await connect(this.ctx.adminUrl);
      this.sampler = new WaitSampler(client, this.ctx.database);
      this.sampler.start();
    })();
  }
  private markEnd(): void {
    this.cpuB = cpuMark(this.ctx.dataDir);
  }
  private async statements(): Promise<StatementStat[]> {
    await this.sampling;
    if (this.sampler) {
      this.waits = await this.sampler.stop();
      await this.sampler.client.end();
    }
    return topStatements(this.admin, this.ctx.database);
  }
  /**
   * Ends the measured phase: CPU and waits are taken now, `stopSystem` runs,
   * then the counters are read once the system's backends have exited.
   */
  async finish(jobs: number, stopSystem: () => Promise<void>): Promise<Diagnostics> {
    this.markEnd();
    const statements = await this.statements();
    await stopSystem();
    return this.end(jobs, statements);
  }

  /** Call after the system stopped, so its backends have exited and flushed their counters. */
  private async end(jobs: number, statements: StatementStat[]): Promise<Diagnostics> {
    await sleep(250);
    const after = await dbCounters(this.admin, this.ctx.database);
    const diagnostics: Diagnostics = { statements, waits: this.waits };
    if (this.cpuA && this.cpuB) diagnostics.cpu = cpuSplit(this.cpuA, this.cpuB);
    if (this.before) {
      diagnostics.commitsPerJob = (after.commits - this.before.commits) / jobs;
      diagnostics.walBytesPerJob = (await walBytesBetween(this.admin, this.before.walLsn, after.walLsn)) / jobs;
      diagnostics.walFsyncsPerJob = (after.walFsyncs - this.before.walFsyncs) / jobs;
    }
    return diagnostics;
  }
}

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, application_name: 'bench' });
  await client.connect();
  return client;
}

function payloads(from: number, to: number, keys = 0): BenchPayload[] {
  const out: BenchPayload[] = [];
  for (let i = from; i < to; i++) out.push(keys > 0 ? { i, key: `key-${i % keys}` } : { i });
  return out;
}

/** Bulk-inserts `jobs` no-op jobs with the system's bulk API, through a producer-only handle. */
export async function seed(
  runner: Runner,
  url: string,
  jobs: number,
  poolSize: number,
  crash = false,
  flow?: StartOptions['flow'],
  keys = 0,
  retention?: 0,
): Promise<number> {
  // A step's retention is the enqueuing client's: the run keeps it from its enqueue.
  const producer = await runner.start({ url, workers: 0, poolSize, crash, flow, retention });
  const t0 = now();
  const chunk = 5_000;
  for (let i = 0; i < jobs; i += chunk) await producer.enqueueMany(payloads(i, Math.min(jobs, i + chunk), keys));
  const ms = now() - t0;
  await producer.stop();
  return ms;
}

/** W1: drain a backlog of queued no-op jobs. Only the drain is timed: first handler start to all completed. */
export async function w1(runner: Runner, ctx: ChildContext, p: WorkloadParams): Promise<WorkloadResult> {
  return drainBacklog(runner, ctx, p, 'W1');
}

/**
 * W1L: W1 with a kind-wide concurrency limit far above the workers, so it
 * never binds: what the limit's claim path costs by itself (SPEC §13 wants
 * it at 0.9× of W1 or better).
 */
export async function w1l(runner: Runner, ctx: ChildContext, p: WorkloadParams): Promise<WorkloadResult> {
  if (runner.flowControl !== true) throw new Error(`W1L needs concurrency limits: ${runner.flowControl}`);
  return drainBacklog(runner, ctx, p, 'W1L', { kindLimit: p.kindLimit ?? 100_000 });
}

/**
 * W1R0: W1 with `retention: 0` (Cyclone's step option): a completed job is
 * deleted with its run as it completes, as graphile-worker deletes its jobs.
 */
export async function w1r0(runner: Runner, ctx: ChildContext, p: WorkloadParams): Promise<WorkloadResult> {
  return drainBacklog(runner, ctx, p, 'W1R0', undefined, 0);
}

async function drainBacklog(
  runner: Runner,
  ctx: ChildContext,
  p: WorkloadParams,
  workload: 'W1' | 'W1L' | 'W1R0',
  flow?: StartOptions['flow'],
  retention?: 0,
): Promise<WorkloadResult> {
  const poolSize = cyclonePoolSize(p.workers);
  const admin = await connect(ctx.adminUrl);
  const check = await connect(ctx.url);
  const probe = new Probe(admin, ctx);
  try {
    const seedMs = await seed(runner, ctx.url, p.jobs, poolSize, false, flow, 0, retention);
    await probe.begin();
    const latch = new Latch();
    let first = 0;
    const handler: JobHandler = () => {
      if (latch.count === 0) {
        first = now();
        probe.markStart();
      }
      latch.hit();
    };
    const t0 = now();
    const handle = await runner.start({ url: ctx.url, workers: p.workers, poolSize, handler, flow, retention });
    const ready = now();
    await latch.reached(p.jobs, p.timeoutMs, 'handler starts');
    await waitUntil(async () => (await runner.pending(check)) === 0, p.timeoutMs, 'all jobs completed');
    const done = now();
    const diagnostics = await probe.finish(p.jobs, () => handle.stop());
    return {
      system: runner.system,
      workload,
      params: p,
      config: runner.describe(p.workers, poolSize) + (flow?.kindLimit ? `; @Step concurrency: { limit: ${flow.kindLimit} } (never binding)` : ''),
      ok: true,
      values: {
        jobsPerSec: p.jobs / ((done - first) / 1000),
        drainMs: done - first,
        startToFirstJobMs: first - t0,
        startCallMs: ready - t0,
        seedMs,
        invocations: latch.count,
      },
      diagnostics,
    };
  } finally {
    await check.end();
    await admin.end();
  }
}

/** W2: single enqueues from concurrent callers, no workers running. */
export async function w2(runner: Runner, ctx: ChildContext, p: WorkloadParams): Promise<WorkloadResult> {
  // An enqueue-only Cyclone client has the default queue's pool; the peers get the same.
  const poolSize = cyclonePoolSize(10);
  const admin = await connect(ctx.adminUrl);
  const check = await connect(ctx.url);
  const probe = new Probe(admin, ctx);
  try {
    const producer = await runner.start({ url: ctx.url, workers: 0, poolSize });
    // Jobs already queued (W6 runs W2 again on the same database).
    const queuedBefore = await runner.pending(check);
    // Warm-up, not timed: one enqueue per caller opens the pool's connections.
    await Promise.all(Array.from({ length: p.callers }, (_, i) => producer.enqueue({ i: -1 - i })));
    await probe.begin();
    const latencies: number[] = [];
    let next = 0;
    probe.markStart();
    const t0 = now();
    await Promise.all(
      Array.from({ length: p.callers }, async () => {
        while (next < p.jobs) {
          const i = next++;
          const s = now();
          await producer.enqueue({ i });
          latencies.push(now() - s);
        }
      }),
    );
    const elapsed = now() - t0;
    let queued = 0;
    const diagnostics = await probe.finish(p.jobs, async () => {
      queued = (await runner.pending(check)) - queuedBefore;
      await producer.stop();
    });
    return {
      system: runner.system,
      workload: 'W2',
      params: p,
      config: runner.describe(0, poolSize),
      ok: queued === p.jobs + p.callers,
      ...(queued === p.jobs + p.callers ? {} : { error: `expected ${p.jobs + p.callers} queued jobs, found ${queued}` }),
      values: {
        enqueuesPerSec: p.jobs / (elapsed / 1000),
        elapsedMs: elapsed,
        latencyP50Ms: percentile(latencies, 50),
        latencyP99Ms: percentile(latencies, 99),
      },
      diagnostics,
    };
  } finally {
    await check.end();
    await admin.end();
  }
}

/** W3: enqueue-to-start latency of jobs sent at a fixed interval to idle workers. */
export async function w3(runner: Runner, ctx: ChildContext, p: WorkloadParams): Promise<WorkloadResult> {
  const poolSize = cyclonePoolSize(p.workers);
  const admin = await connect(ctx.adminUrl);
  const probe = new Probe(admin, ctx);
  try {
    const latencies: number[] = [];
    // Each job's timeline: when its enqueue was called and returned, and when its handler began (wall clock).
    const calledAt = new Map<number, number>();
    const returnedAt = new Map<number, number>();
    const startedAt = new Map<number, number>();
    const latch = new Latch();
    const handler: JobHandler = (payload) => {
      const at = wallNow();
      if (payload.sentAt !== undefined) latencies.push(at - payload.sentAt);
      startedAt.set(payload.i, at);
      latch.hit();
    };
    const handle = await runner.start({ url: ctx.url, workers: p.workers, poolSize, handler });
    // Let the workers go idle (first polls done, LISTEN connections up).
    await sleep(1_500);
    await probe.begin();
    probe.markStart();
    const sends: Promise<void>[] = [];
    const t0 = now();
    for (let i = 0; i < p.jobs; i++) {
      const due = t0 + i * p.intervalMs;
      const wait = due - now();
      if (wait > 0) await sleep(wait);
      const sentAt = wallNow();
      calledAt.set(i, sentAt);
      sends.push(handle.enqueue({ i, sentAt }).then(() => void returnedAt.set(i, wallNow())));
    }
    await Promise.all(sends);
    await latch.reached(p.jobs, p.timeoutMs, 'handler starts');
    const enqueueMs = [...returnedAt].map(([i, at]) => at - calledAt.get(i)!);
    // From the enqueue's return to the handler's start: negative when the handler began first.
    const afterReturnMs = [...startedAt].map(([i, at]) => at - returnedAt.get(i)!);
    const diagnostics = await probe.finish(p.jobs, () => handle.stop());
    return {
      system: runner.system,
      workload: 'W3',
      params: p,
      config: runner.describe(p.workers, poolSize),
      ok: true,
      values: {
        p50Ms: percentile(latencies, 50),
        p95Ms: percentile(latencies, 95),
        p99Ms: percentile(latencies, 99),
        maxMs: Math.max(...latencies),
        meanMs: latencies.reduce((a, b) => a + b, 0) / latencies.length,
        enqueueP50Ms: percentile(enqueueMs, 50),
        afterReturnP50Ms: percentile(afterReturnMs, 50),
      },
      diagnostics,
    };
  } finally {
    await admin.end();
  }
}

/** W4: producers and workers at once; jobs of `jobMs` each. Timed from the first enqueue to all completed. */
export async function w4(runner: Runner, ctx: ChildContext, p: WorkloadParams): Promise<WorkloadResult> {
  const poolSize = cyclonePoolSize(p.workers);
  const admin = await connect(ctx.adminUrl);
  const check = await connect(ctx.url);
  const probe = new Probe(admin, ctx);
  try {
    const latch = new Latch();
    const handler: JobHandler = async () => {
      await sleep(p.jobMs);
      latch.hit();
    };
    const handle = await runner.start({ url: ctx.url, workers: p.workers, poolSize, handler });
    await sleep(1_000);
    await probe.begin();
    let next = 0;
    probe.markStart();
    const t0 = now();
    await Promise.all(
      Array.from({ length: p.callers }, async () => {
        while (next < p.jobs) {
          const i = next++;
          await handle.enqueue({ i });
        }
      }),
    );
    const enqueued = now();
    await latch.reached(p.jobs, p.timeoutMs, 'handlers finished');
    await waitUntil(async () => (await runner.pending(check)) === 0, p.timeoutMs, 'all jobs completed');
    const done = now();
    const diagnostics = await probe.finish(p.jobs, () => handle.stop());
    return {
      system: runner.system,
      workload: 'W4',
      params: p,
      config: `${runner.describe(p.workers, poolSize)}; ${p.callers} producers enqueue one job at a time in the same process`,
      ok: true,
      values: {
        jobsPerSec: p.jobs / ((done - t0) / 1000),
        elapsedMs: done - t0,
        enqueuePhaseMs: enqueued - t0,
        invocations: latch.count,
      },
      diagnostics,
    };
  } finally {
    await check.end();
    await admin.end();
  }
}

/**
 * W8: drain a backlog spread over many keys with a per-key concurrency limit,
 * jobs of `jobMs` each: jobs/s, and how long the slowest key waited for its
 * first start (from the first start of any job), which fair claiming keeps
 * short. Only the drain is timed.
 */
export async function w8(runner: Runner, ctx: ChildContext, p: WorkloadParams): Promise<WorkloadResult> {
  if (runner.flowControl !== true) throw new Error(`W8 needs per-key concurrency limits: ${runner.flowControl}`);
  const keys = p.keys ?? 100;
  const flow = { perKey: p.perKey ?? 2 };
  const poolSize = cyclonePoolSize(p.workers);
  const admin = await connect(ctx.adminUrl);
  const check = await connect(ctx.url);
  const probe = new Probe(admin, ctx);
  try {
    const seedMs = await seed(runner, ctx.url, p.jobs, poolSize, false, flow, keys);
    await probe.begin();
    const latch = new Latch();
    let first = 0;
    const firstStart = new Map<string, number>();
    const running = new Map<string, number>();
    let overLimit = 0;
    const handler: JobHandler = async (payload) => {
      const t = now();
      if (latch.count === 0 && first === 0) {
        first = t;
        probe.markStart();
      }
      const key = payload.key ?? '';
      if (!firstStart.has(key)) firstStart.set(key, t);
      const n = (running.get(key) ?? 0) + 1;
      running.set(key, n);
      if (n > flow.perKey) overLimit += 1;
      await sleep(p.jobMs);
      running.set(key, running.get(key)! - 1);
      latch.hit();
    };
    const handle = await runner.start({ url: ctx.url, workers: p.workers, poolSize, handler, flow });
    await latch.reached(p.jobs, p.timeoutMs, 'handlers finished');
    await waitUntil(async () => (await runner.pending(check)) === 0, p.timeoutMs, 'all jobs completed');
    const done = now();
    const diagnostics = await probe.finish(p.jobs, () => handle.stop());
    const delays = [...firstStart.values()].map((t) => t - first);
    const ok = firstStart.size === keys && overLimit === 0;
    return {
      system: runner.system,
      workload: 'W8',
      params: p,
      config: `${runner.describe(p.workers, poolSize)}; ${runner.describeFlow?.(flow) ?? 'per-key limit'} over ${keys} keys`,
      ok,
      ...(ok ? {} : { error: `${firstStart.size}/${keys} keys started; ${overLimit} starts over the per-key limit` }),
      values: {
        jobsPerSec: p.jobs / ((done - first) / 1000),
        drainMs: done - first,
        maxKeyStartDelayMs: Math.max(...delays),
        p50KeyStartDelayMs: percentile(delays, 50),
        overLimit,
        seedMs,
        invocations: latch.count,
      },
      diagnostics,
    };
  } finally {
    await check.end();
    await admin.end();
  }
}

export const WORKLOADS: Record<WorkloadName, typeof w1> = { W1: w1, W2: w2, W3: w3, W4: w4, W8: w8, W1L: w1l, W1R0: w1r0 };
