/**
 * W7: soak. Cyclone only: jobs enqueued at a steady rate by a producer
 * process and run by worker processes, with a retention short enough that
 * finished runs are deleted as the run goes, for long enough that a leak or
 * an unbounded table would show. Sampled throughout: each process's heap
 * (after a full GC) and RSS, the tables' and indexes' sizes and dead tuples,
 * the throughput of each interval, and every error or warning the processes
 * logged.
 */
import 'reflect-metadata';
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { ConsoleLogger, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { CycloneClient, CycloneModule, Step } from 'cyclone-nestjs';
import { percentile } from './lib/stats.js';
import { sleep, type ChildContext } from './workloads.js';

export const SOAK_KIND = 'soak_job';

export interface SoakParams {
  jobs: number;
  /** Enqueues a second, held steady. */
  ratePerSec: number;
  processes: number;
  workersPerProcess: number;
  /** Module option `retention` of every process: finished runs are deleted this long after they finish. */
  retention: string;
  sampleEveryMs: number;
  /** Memory and table sizes at "start" are the first sample after this long (start-up and JIT settle first). */
  warmupMs: number;
  maxRunMs: number;
}

/** What a process reports of itself, every sample. */
export interface ProcessSample {
  atMs: number;
  heapMb: number;
  rssMb: number;
  /** Worker: handler calls; producer: jobs enqueued. */
  count: number;
  /** Enqueues refused (producer). */
  refused: number;
  errors: number;
  warnings: number;
}

export interface TableSample {
  atMs: number;
  runsMb: number;
  stepsMb: number;
  indexesMb: number;
  liveRuns: number;
  deadTuples: number;
  /** Steps due and not yet claimed: how far the workers are behind the producer. */
  backlog: number;
  /** Handler calls of all workers so far, as they last reported. */
  handled: number;
}

export interface SoakProcess {
  role: 'worker' | 'producer';
  pid: number;
  first: ProcessSample;
  start: ProcessSample;
  end: ProcessSample;
  /** end ÷ start. */
  heapRatio: number;
  rssRatio: number;
}

export interface SoakResult {
  system: 'cyclone';
  params: SoakParams;
  ok: boolean;
  error?: string;
  runMs: number;
  enqueued: number;
  handled: number;
  refusedEnqueues: number;
  errors: number;
  warnings: number;
  processes: SoakProcess[];
  tables: { start: TableSample; max: TableSample; end: TableSample; samples: TableSample[] };
  /** Jobs handled a second in each sample interval. */
  throughput: { atMs: number; jobsPerSec: number }[];
  /** Over the intervals after the warm-up while the producer was enqueueing: the steady state. */
  throughputSummary: { min: number; p50: number; max: number };
  /** When the producer had enqueued every job. */
  producerDoneMs: number | null;
  /** At the end: steps left unfinished, and runs that failed. */
  leftover: { unfinished: number; failed: number };
}

/** A Nest logger that counts what it is given to say as errors and warnings, for the report. */
class CountingLogger extends ConsoleLogger {
  errors = 0;
  warnings = 0;
  override error(message: unknown, ...rest: unknown[]): void {
    this.errors += 1;
    super.error(message, ...(rest as [string]));
  }
  override warn(message: unknown, ...rest: unknown[]): void {
    this.warnings += 1;
    super.warn(message, ...(rest as [string]));
  }
}

let handled = 0;

@Injectable()
class SoakSteps {
  @Step(SOAK_KIND)
  async run(): Promise<null> {
    handled += 1;
    return null;
  }
}

function sampleOf(startedAt: number, count: number, refused: number, logger: CountingLogger): ProcessSample {
  // After a full collection, the heap is what is still held: what a leak would grow.
  (globalThis as { gc?: () => void }).gc?.();
  const memory = process.memoryUsage();
  return {
    atMs: Date.now() - startedAt,
    heapMb: memory.heapUsed / 2 ** 20,
    rssMb: memory.rss / 2 ** 20,
    count,
    refused,
    errors: logger.errors,
    warnings: logger.warnings,
  };
}

/** Reports a sample every `everyMs` on stdout, and a last one on SIGTERM before `stop`. */
async function reportUntilTerm(everyMs: number, sample: () => ProcessSample, stop: () => Promise<void>): Promise<void> {
  const timer = setInterval(() => process.stdout.write(`SAMPLE ${JSON.stringify(sample())}\n`), everyMs);
  await new Promise<void>((resolve) => process.once('SIGTERM', () => resolve()));
  clearInterval(timer);
  process.stdout.write(`SAMPLE ${JSON.stringify(sample())}\n`);
  await stop();
}

function soakModule(ctx: ChildContext, p: SoakParams, workers: number) {
  @Module({
    imports: [
      CycloneModule.forRoot({
        connection: { url: ctx.url },
        ...(workers > 0 ? { queues: { default: { workers } } } : { runWorkers: false }),
        retention: p.retention,
      }),
    ],
    providers: [SoakSteps],
  })
  class SoakModule {}
  return SoakModule;
}

/** Child: one worker process of the soak. */
export async function soakWorker(ctx: ChildContext, p: SoakParams): Promise<void> {
  const logger = new CountingLogger('Soak', { logLevels: ['error', 'warn'] });
  const startedAt = Date.now();
  const app = await NestFactory.createApplicationContext(soakModule(ctx, p, p.workersPerProcess), { logger });
  // SIGTERM closes the app (the workers drain) once the last sample is out.
  process.stdout.write('READY\n');
  await reportUntilTerm(p.sampleEveryMs, () => sampleOf(startedAt, handled, 0, logger), () => app.close());
}

/**
 * Child: the producer. Holds the rate by enqueueing, every 100 ms, what the
 * schedule says is due (in statements of at most 1,000 jobs), until `jobs`.
 */
export async function soakProducer(ctx: ChildContext, p: SoakParams): Promise<void> {
  const logger = new CountingLogger('Soak', { logLevels: ['error', 'warn'] });
  const startedAt = Date.now();
  const app = await NestFactory.createApplicationContext(soakModule(ctx, p, 0), { logger });
  const client = app.get(CycloneClient);
  let enqueued = 0;
  let refused = 0;
  let stopping = false;
  const producing = (async () => {
    const t0 = Date.now();
    while (enqueued + refused < p.jobs && !stopping) {
      const due = Math.min(p.jobs, Math.floor(((Date.now() - t0) / 1000) * p.ratePerSec));
      while (enqueued + refused < due && !stopping) {
        const n = Math.min(1_000, due - enqueued - refused);
        try {
          await client.enqueueMany(SOAK_KIND, Array.from({ length: n }, (_, k) => ({ i: enqueued + refused + k })));
          enqueued += n;
        } catch (err) {
          refused += n;
          logger.error(`enqueueMany of ${n} jobs failed: ${(err as Error).message}`);
        }
      }
      await sleep(100);
    }
    process.stdout.write(`DONE ${enqueued}\n`);
  })();
  process.stdout.write('READY\n');
  await reportUntilTerm(p.sampleEveryMs, () => sampleOf(startedAt, enqueued, refused, logger), async () => {
    stopping = true;
    await producing;
    await app.close();
  });
}

export interface SoakOrchestration {
  ctx: ChildContext;
  params: SoakParams;
  childScript: string;
  logPath: string;
  log(line: string): void;
  track(proc: ChildProcess): void;
}

interface Child {
  role: 'worker' | 'producer';
  proc: ChildProcess;
  samples: ProcessSample[];
  ready: Promise<void>;
  exited: Promise<void>;
  done: boolean;
}

/** Orchestrator side of W7. */
export async function runSoak(o: SoakOrchestration): Promise<SoakResult> {
  const p = o.params;
  const logStream = createWriteStream(o.logPath, { flags: 'a' });
  const spawnChild = (role: Child['role']): Child => {
    const proc = spawn(process.execPath, ['--expose-gc', o.childScript], {
      env: { ...process.env, BENCH_TASK: JSON.stringify({ mode: `soak-${role}`, system: 'cyclone', ctx: o.ctx, params: p }) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    o.track(proc);
    proc.stderr!.pipe(logStream, { end: false });
    const child: Child = { role, proc, samples: [], done: false } as unknown as Child;
    child.exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    child.ready = new Promise<void>((resolve, reject) => {
      void child.exited.then(() => reject(new Error(`soak ${role} ${proc.pid} exited (see ${o.logPath})`)));
      createInterface({ input: proc.stdout! }).on('line', (line) => {
        if (line === 'READY') resolve();
        else if (line.startsWith('DONE')) child.done = true;
        else if (line.startsWith('SAMPLE ')) child.samples.push(JSON.parse(line.slice('SAMPLE '.length)) as ProcessSample);
        else logStream.write(`[soak ${role} ${proc.pid}] ${line}\n`);
      });
    });
    child.ready.catch(() => undefined);
    return child;
  };

  const pool = new pg.Pool({ connectionString: o.ctx.url, application_name: 'bench', max: 2 });
  const children: Child[] = [];
  const tables: TableSample[] = [];
  const t0 = performance.now();
  let error: string | undefined;
  let producerDoneMs: number | null = null;
  try {
    // The first worker migrates; the others and the producer start on the migrated schema.
    const first = spawnChild('worker');
    children.push(first);
    await first.ready;
    for (let k = 1; k < p.processes; k++) children.push(spawnChild('worker'));
    await Promise.all(children.map((c) => c.ready));
    const producer = spawnChild('producer');
    children.push(producer);
    await producer.ready;
    o.log(`  W7: ${p.processes} worker processes × ${p.workersPerProcess} and a producer at ${p.ratePerSec} jobs/s`);
    const workers = () => children.filter((c) => c.role === 'worker');
    const handledNow = () => workers().reduce((n, c) => n + (c.samples.at(-1)?.count ?? 0), 0);
    for (;;) {
      await sleep(p.sampleEveryMs);
      const at = performance.now() - t0;
      const done = handledNow();
      tables.push({ ...(await tableSample(pool, at)), handled: done });
      const last = tables.at(-1)!;
      if (producerDoneMs === null && children.find((c) => c.role === 'producer')?.done) producerDoneMs = at;
      o.log(
        `  W7 ${(at / 1000).toFixed(0)} s: ${done.toLocaleString('en-US')} handled, backlog ${last.backlog}, ` +
          `tables ${(last.runsMb + last.stepsMb + last.indexesMb).toFixed(1)} MB, ${last.liveRuns} runs live`,
      );
      if (producer.done && done >= p.jobs && last.backlog === 0) break;
      if (at > p.maxRunMs) {
        error = `run limit of ${p.maxRunMs} ms reached with ${done} of ${p.jobs} handled`;
        break;
      }
      if (children.some((c) => c.proc.exitCode !== null)) {
        error = 'a soak process exited during the run';
        break;
      }
    }
  } catch (err) {
    error = (err as Error).message;
  } finally {
    for (const c of children) c.proc.kill('SIGTERM');
    await Promise.all(
      children.map(async (c) => {
        const timer = setTimeout(() => c.proc.kill('SIGKILL'), 30_000);
        await c.exited;
        clearTimeout(timer);
      }),
    );
    logStream.end();
  }
  const runMs = performance.now() - t0;
  const [leftover] = (
    await pool.query(
      `/* bench */ SELECT (SELECT count(*) FROM cyclone_steps WHERE state NOT IN ('completed', 'discarded', 'cancelled'))::int AS unfinished,
                          (SELECT count(*) FROM cyclone_runs WHERE state = 'failed')::int AS failed`,
    )
  ).rows as { unfinished: number; failed: number }[];
  await pool.end();

  const processes: SoakProcess[] = children
    .filter((c) => c.samples.length > 0)
    .map((c) => {
      const started = c.samples.find((s) => s.atMs >= p.warmupMs) ?? c.samples[0];
      const end = c.samples.at(-1)!;
      return {
        role: c.role,
        pid: c.proc.pid!,
        first: c.samples[0],
        start: started,
        end,
        heapRatio: end.heapMb / started.heapMb,
        rssRatio: end.rssMb / started.rssMb,
      };
    });
  const last = (role: Child['role']) => children.filter((c) => c.role === role).map((c) => c.samples.at(-1));
  const handledTotal = last('worker').reduce((n, s) => n + (s?.count ?? 0), 0);
  const producerEnd = last('producer')[0];
  // Throughput per interval, from the workers' counts as the orchestrator saw them at each sample.
  const throughput = tables.slice(1).map((t, i) => ({
    atMs: t.atMs,
    jobsPerSec: ((t.handled - tables[i].handled) * 1000) / (t.atMs - tables[i].atMs),
  }));
  const steady = throughput.filter((r) => r.atMs >= p.warmupMs && (producerDoneMs === null || r.atMs <= producerDoneMs));
  const rates = (steady.length > 0 ? steady : throughput).map((r) => r.jobsPerSec);
  const byTotal = (t: TableSample) => t.runsMb + t.stepsMb + t.indexesMb;
  const warm = tables.filter((t) => t.atMs >= p.warmupMs);
  const tableStart = warm[0] ?? tables[0];
  return {
    system: 'cyclone',
    params: p,
    ok: error === undefined && leftover.unfinished === 0,
    ...(error ? { error } : {}),
    runMs,
    enqueued: producerEnd?.count ?? 0,
    handled: handledTotal,
    refusedEnqueues: producerEnd?.refused ?? 0,
    errors: children.reduce((n, c) => n + (c.samples.at(-1)?.errors ?? 0), 0),
    warnings: children.reduce((n, c) => n + (c.samples.at(-1)?.warnings ?? 0), 0),
    processes,
    tables: {
      start: tableStart,
      max: tables.reduce((a, b) => (byTotal(b) > byTotal(a) ? b : a), tables[0]),
      end: tables.at(-1)!,
      samples: tables,
    },
    throughput,
    throughputSummary: { min: Math.min(...rates), p50: percentile(rates, 50), max: Math.max(...rates) },
    producerDoneMs,
    leftover,
  };
}

async function tableSample(pool: pg.Pool, atMs: number): Promise<Omit<TableSample, 'handled'>> {
  const { rows } = await pool.query(`/* bench */
    WITH parts AS (
      SELECT 'runs' AS t, relid FROM pg_partition_tree('cyclone_runs')
      UNION ALL SELECT 'steps', relid FROM pg_partition_tree('cyclone_steps')
    )
    -- The tables are partitioned: the parents hold nothing, their months hold it all.
    SELECT (SELECT sum(pg_table_size(relid)) FROM parts WHERE t = 'runs') AS runs,
           (SELECT sum(pg_table_size(relid)) FROM parts WHERE t = 'steps') AS steps,
           (SELECT sum(pg_indexes_size(relid)) FROM parts) AS indexes,
           (SELECT sum(n_live_tup) FROM pg_stat_user_tables u JOIN parts USING (relid) WHERE t = 'runs') AS live,
           (SELECT sum(n_dead_tup) FROM pg_stat_user_tables u JOIN parts USING (relid)) AS dead,
           (SELECT count(*) FROM cyclone_steps WHERE state = 'available' AND scheduled_at <= now()) AS backlog`);
  const r = rows[0];
  const mb = (x: unknown) => Number(x) / 2 ** 20;
  return {
    atMs,
    runsMb: mb(r.runs),
    stepsMb: mb(r.steps),
    indexesMb: mb(r.indexes),
    liveRuns: Number(r.live),
    deadTuples: Number(r.dead),
    backlog: Number(r.backlog),
  };
}
