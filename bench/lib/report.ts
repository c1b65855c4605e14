import type { CrashParams, CrashResult } from '../crash.js';
import type { SystemName } from '../runners/types.js';
import type { WorkloadName, WorkloadParams, WorkloadResult } from '../workloads.js';
import type { PgbenchResult } from './pgbench.js';
import { fmt, fmtSpread, ratio, spread, type Spread } from './stats.js';

export interface BenchReport {
  generatedAt: string;
  command: string;
  durationSeconds: number;
  quick: boolean;
  reps: number;
  systems: SystemName[];
  machine: {
    hostname: string;
    nproc: number;
    cpuModel: string;
    memoryGb: number;
    kernel: string;
    node: string;
    filesystem: string;
    commit: string;
  };
  server: { settings: Record<string, string>; flags: Record<string, string>; embedded: string };
  pgbench: { version: string; clients: number; seconds: number; scale: number; runs: PgbenchResult[] };
  params: Record<WorkloadName, WorkloadParams>;
  crashParams: CrashParams;
  configs: Partial<Record<SystemName, Record<string, string>>>;
  runs: WorkloadResult[];
  crash: CrashResult[];
  history: { rows: number; seed?: Record<string, number>; runs: WorkloadResult[] };
}

const LABEL: Record<SystemName, string> = { cyclone: 'Cyclone', 'pg-boss': 'pg-boss', 'graphile-worker': 'graphile-worker' };

interface Row {
  workload: WorkloadName;
  title: string;
  metric: string;
  key: string;
  higherIsBetter: boolean;
  ceiling: boolean;
}

function rows(p: Record<WorkloadName, WorkloadParams>): Row[] {
  const n = (x: number) => x.toLocaleString('en-US');
  return [
    { workload: 'W1', title: `W1 drain ${n(p.W1.jobs)} queued no-op jobs, ${p.W1.workers} workers`, metric: 'jobs/s', key: 'jobsPerSec', higherIsBetter: true, ceiling: true },
    { workload: 'W2', title: `W2 ${n(p.W2.jobs)} single enqueues, ${p.W2.callers} concurrent callers`, metric: 'enqueues/s', key: 'enqueuesPerSec', higherIsBetter: true, ceiling: true },
    { workload: 'W3', title: `W3 enqueue→start, ${n(p.W3.jobs)} jobs ${p.W3.intervalMs} ms apart, ${p.W3.workers} idle workers`, metric: 'p50 ms', key: 'p50Ms', higherIsBetter: false, ceiling: false },
    { workload: 'W3', title: '', metric: 'p95 ms', key: 'p95Ms', higherIsBetter: false, ceiling: false },
    { workload: 'W3', title: '', metric: 'p99 ms', key: 'p99Ms', higherIsBetter: false, ceiling: false },
    { workload: 'W4', title: `W4 ${n(p.W4.jobs)} jobs of ${p.W4.jobMs} ms, ${p.W4.workers} workers, ${p.W4.callers} producers at once`, metric: 'jobs/s', key: 'jobsPerSec', higherIsBetter: true, ceiling: true },
    { workload: 'W8', title: `W8 ${n(p.W8.jobs)} jobs of ${p.W8.jobMs} ms over ${p.W8.keys} keys, per-key limit ${p.W8.perKey}, ${p.W8.workers} workers`, metric: 'jobs/s', key: 'jobsPerSec', higherIsBetter: true, ceiling: false },
    { workload: 'W8', title: '', metric: "slowest key's first start, ms", key: 'maxKeyStartDelayMs', higherIsBetter: false, ceiling: false },
    { workload: 'W1L', title: `W1L = W1 with a concurrency limit of ${n(p.W1L.kindLimit ?? 0)} (never binding)`, metric: 'jobs/s', key: 'jobsPerSec', higherIsBetter: true, ceiling: true },
  ];
}

function valuesOf(runs: WorkloadResult[], system: SystemName, workload: WorkloadName, key: string): Spread {
  return spread(
    runs.filter((r) => r.system === system && r.workload === workload && r.ok && r.values).map((r) => r.values[key]),
  );
}

function failures(runs: WorkloadResult[], system: SystemName, workload: WorkloadName): number {
  return runs.filter((r) => r.system === system && r.workload === workload && !r.ok).length;
}

export function renderMarkdown(r: BenchReport): string {
  const out: string[] = [];
  const peers = r.systems.filter((s) => s !== 'cyclone');
  const hasCyclone = r.systems.includes('cyclone');
  const tps = spread(r.pgbench.runs.map((x) => x.tps));
  const s = r.server.settings;
  out.push(`## Benchmark results${r.quick ? ' (--quick smoke run: small workloads, not for comparison)' : ''}`);
  out.push('');
  out.push(
    `Produced by \`${r.command}\` on ${r.generatedAt.slice(0, 10)} in ${Math.round(r.durationSeconds)} s, ` +
      `Cyclone at commit ${r.machine.commit}.`,
  );
  out.push(
    `Machine: ${r.machine.nproc} CPUs (${r.machine.cpuModel}), ${r.machine.memoryGb} GB RAM, Linux ${r.machine.kernel}, ` +
      `${r.machine.filesystem} disk; Node ${r.machine.node}; PostgreSQL ${s.server_version} (${r.server.embedded}) ` +
      `and the load generators on the same machine.`,
  );
  out.push(
    `Server: fsync=${s.fsync}, synchronous_commit=${s.synchronous_commit}, full_page_writes=${s.full_page_writes} ` +
      `(durability as shipped: every commit is flushed), shared_buffers=${s.shared_buffers}, max_connections=${s.max_connections}, ` +
      `pg_stat_statements loaded.`,
  );
  out.push(
    `Each figure is the median [min–max] of ${r.reps} repetition(s); every run is its own process on a fresh database; ` +
      `the systems are interleaved (the order rotates each repetition). Ratios are Cyclone ÷ peer on the medians: ` +
      `above 1 is better for Cyclone on throughput, below 1 is better on latency. Ceiling: \`${r.pgbench.runs[0]?.command ?? 'pgbench'}\` ` +
      `(${r.pgbench.version}) on the same server, ${fmtSpread(tps)} tps.`,
  );
  out.push('');
  const header = ['workload', 'metric', ...r.systems.map((x) => LABEL[x])];
  if (hasCyclone) for (const p of peers) header.push(`Cyclone/${LABEL[p]}`);
  if (hasCyclone) header.push('Cyclone/ceiling');
  out.push(`| ${header.join(' | ')} |`);
  out.push(`| ${header.map((_, i) => (i < 2 ? '---' : '---:')).join(' | ')} |`);
  for (const row of rows(r.params)) {
    const cells = [row.title, `${row.metric} ${row.higherIsBetter ? '↑' : '↓'}`];
    const medians: Partial<Record<SystemName, number>> = {};
    for (const system of r.systems) {
      const v = valuesOf(r.runs, system, row.workload, row.key);
      medians[system] = v.median;
      const failed = failures(r.runs, system, row.workload);
      cells.push(fmtSpread(v) + (failed ? ` (${failed} failed)` : ''));
    }
    if (hasCyclone) {
      for (const p of peers) cells.push(ratio(medians.cyclone ?? NaN, medians[p] ?? NaN));
      cells.push(row.ceiling ? ratio(medians.cyclone ?? NaN, tps.median) : '');
    }
    out.push(`| ${cells.join(' | ')} |`);
  }
  out.push(`| ceiling: pgbench simple-update, ${r.pgbench.clients} clients | tps | ${fmtSpread(tps)} |${' |'.repeat(header.length - 3)}`);
  out.push('');
  const limited = valuesOf(r.runs, 'cyclone', 'W1L', 'jobsPerSec');
  const plain = valuesOf(r.runs, 'cyclone', 'W1', 'jobsPerSec');
  if (Number.isFinite(limited.median) && Number.isFinite(plain.median)) {
    const skipped = r.systems
      .filter((x) => r.configs[x]?.W8?.startsWith('not run'))
      .map((x) => `${LABEL[x]}: ${r.configs[x]!.W8!.slice('not run: '.length)}`);
    out.push(
      `Flow control: Cyclone's W1 with a concurrency limit that never binds (W1L) runs at ${ratio(limited.median, plain.median)} of W1 ` +
        '(the target is 0.9 or better).' +
        (skipped.length ? ` W8 and W1L run only where the installed version has per-key concurrency limits (${skipped.join('; ')}).` : ''),
    );
    out.push('');
  }
  const noisy = [...r.runs, ...r.history.runs].filter((x) => (x.diagnostics?.cpu?.otherCores ?? 0) > 0.3);
  if (noisy.length) {
    out.push(
      `Warning: in ${noisy.length} of ${r.runs.length + r.history.runs.length} runs other processes kept more than 0.3 of the ` +
        `${r.machine.nproc} cores busy during the measurement (worst ${fmt(Math.max(...noisy.map((x) => x.diagnostics.cpu!.otherCores)))} cores); ` +
        'those figures are lower than the machine can do and their spread is wider. See "other load" below and latest.json.',
    );
    out.push('');
  }

  if (r.crash.length) {
    const cp = r.crashParams;
    out.push(
      `**W5 crash** — ${cp.jobs.toLocaleString('en-US')} jobs of ${cp.jobMs} ms, ${cp.processes} worker processes × ${cp.workersPerProcess} workers; ` +
        `during the first ${cp.killPhaseMs / 1000} s of the run the process that has been up longest is SIGKILLed every ${cp.killEveryMs / 1000} s ` +
        `and a new one started at once; then the workers are left to finish. Each handler records its invocation, ` +
        `then writes a side effect keyed by job and fenced by the job's token (Cyclone: fencingToken; pg-boss: retryCount; ` +
        `graphile-worker: attempts). One run per system.`,
    );
    out.push('');
    out.push('| system | kills | lost | applied twice | extra invocations | fenced writes refused | jobs held by killed workers | of them claimable again in the run | kill→claimable p50 | p99 | worker boot p50 | run |');
    out.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const c of r.crash) {
      if (c.kills === undefined) {
        out.push(`| ${LABEL[c.system]} | failed: ${c.error} |||||||||`);
        continue;
      }
      const claim = (v: number) => (Number.isFinite(v) ? `${fmt(v / 1000)} s` : 'never');
      out.push(
        `| ${LABEL[c.system]} | ${c.kills} | ${c.lost} | ${c.appliedTwice} | ${c.extraInvocations} | ${c.fencingRejected} | ` +
          `${c.stranded} | ${c.strandedFreed} | ${claim(c.killToClaimableP50Ms)} | ${claim(c.killToClaimableP99Ms)} | ` +
          `${claim(c.bootP50Ms)} | ` +
          `${fmt(c.runMs / 1000)} s${c.error ? ` (${c.error})` : c.ended ? ` (ended: ${c.ended})` : ''} |`,
      );
    }
    const notes = r.crash.filter((c) => c.claimableNote).map((c) => `${LABEL[c.system]}: ${c.claimableNote}.`);
    out.push('');
    out.push(
      '"Lost" is jobs not completed when the run ended (all done, or no completion for ' +
        `${cp.stallMs / 1000} s after the kill phase). "Applied twice" is jobs whose fenced side effect was accepted twice: a worker killed ` +
        'after the effect committed but before the completion did is re-run with a higher token. ' +
        'Kill→claimable is measured per job from the SIGKILL to the moment the database shows the job no longer held by the dead process. ' +
        notes.join(' '),
    );
    out.push('');
  }

  if (r.history.runs.length) {
    const h = r.history;
    const rowsOf = (w: WorkloadName, key: string) =>
      spread(h.runs.filter((x) => x.workload === w && x.ok && x.values).map((x) => x.values[key]));
    const empty1 = valuesOf(r.runs, 'cyclone', 'W1', 'jobsPerSec');
    const empty2 = valuesOf(r.runs, 'cyclone', 'W2', 'enqueuesPerSec');
    const hist1 = rowsOf('W1', 'jobsPerSec');
    const hist2 = rowsOf('W2', 'enqueuesPerSec');
    out.push(
      `**W6 history** — Cyclone with ${h.rows.toLocaleString('en-US')} completed runs (and their steps) already in its tables, ` +
        `inserted with SQL and vacuumed/analysed` +
        (h.seed ? ` (tables ${fmt((h.seed.runsBytes + h.seed.stepsBytes) / 2 ** 20)} MB)` : '') +
        '; ratio to the same workload on empty tables above.',
    );
    out.push('');
    out.push('| workload | empty tables | with history | history ÷ empty |');
    out.push('| --- | ---: | ---: | ---: |');
    out.push(`| W1 drain, jobs/s | ${fmtSpread(empty1)} | ${fmtSpread(hist1)} | ${ratio(hist1.median, empty1.median)} |`);
    out.push(`| W2 enqueue, enqueues/s | ${fmtSpread(empty2)} | ${fmtSpread(hist2)} | ${ratio(hist2.median, empty2.median)} |`);
    out.push('');
  }

  // Where the time goes: per job, medians over repetitions.
  out.push(
    '**Diagnostics** (medians over repetitions; waits from repetition 1): transactions committed per job in the run\'s database ' +
      '(read-only ones included: each NOTIFY delivered to a listening connection is one), WAL fsyncs and WAL bytes per job, CPU in cores ' +
      '(CPU seconds ÷ wall seconds) of the system\'s Node process, of all PostgreSQL processes, and of everything else on the machine ' +
      '(other processes: noise), and the average number of the database\'s active backends in their two most common wait states ' +
      '(sampled every 50 ms; Lock:object is the lock on the server\'s NOTIFY queue that a committing transaction which sent NOTIFY holds through its commit).',
  );
  out.push('');
  out.push('| workload | system | commits/job | WAL fsyncs/job | WAL bytes/job | Node cores | PostgreSQL cores | other load, cores | main wait of active backends |');
  out.push('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |');
  for (const w of ['W1', 'W2', 'W4'] as WorkloadName[]) {
    for (const system of r.systems) {
      const mine = r.runs.filter((x) => x.system === system && x.workload === w && x.ok && x.diagnostics);
      if (!mine.length) continue;
      const med = (f: (x: WorkloadResult) => number | undefined) =>
        spread(mine.map(f).filter((v): v is number => v !== undefined)).median;
      const waits = mine[0].diagnostics.waits ?? {};
      const top = Object.entries(waits)
        .filter(([k]) => !k.startsWith('('))
        .slice(0, 2)
        .map(([k, v]) => `${k} ${fmt(v)}`)
        .join(', ');
      out.push(
        `| ${w} | ${LABEL[system]} | ${fmt(med((x) => x.diagnostics.commitsPerJob))} | ${fmt(med((x) => x.diagnostics.walFsyncsPerJob))} | ` +
          `${fmt(med((x) => x.diagnostics.walBytesPerJob))} | ` +
          `${fmt(med((x) => x.diagnostics.cpu?.nodeCores))} | ${fmt(med((x) => x.diagnostics.cpu?.postgresCores))} | ` +
          `${fmt(med((x) => x.diagnostics.cpu?.otherCores))} | ${top} |`,
      );
    }
  }
  out.push('');
  if (hasCyclone) {
    for (const w of ['W1', 'W2', 'W4'] as WorkloadName[]) {
      const run = r.runs.find((x) => x.system === 'cyclone' && x.workload === w && x.ok && x.diagnostics?.statements?.length);
      if (!run) continue;
      const jobs = run.params.jobs;
      const stmts = run.diagnostics.statements!.slice(0, 8);
      out.push(`Cyclone's statements in ${w} (repetition 1, pg_stat_statements, nested statements of functions included; execution time excludes commit flushes):`);
      out.push('');
      out.push('| statement | top level | calls/job | mean ms | total ms |');
      out.push('| --- | --- | ---: | ---: | ---: |');
      for (const st of stmts) {
        out.push(
          `| \`${st.query.slice(0, 110).replace(/\|/g, '\\|')}\` | ${st.toplevel ? 'yes' : 'no'} | ${fmt(st.calls / jobs)} | ${fmt(st.meanMs)} | ${fmt(st.totalMs)} |`,
        );
      }
      out.push('');
    }
  }

  out.push('**Configurations**');
  out.push('');
  for (const system of r.systems) {
    const c = r.configs[system];
    if (!c) continue;
    out.push(`- ${LABEL[system]}:`);
    for (const [w, text] of Object.entries(c)) out.push(`  - ${w}: ${text}`);
  }
  out.push(
    `- Pools: every system gets the connection pool Cyclone sizes for itself at that worker count (Cyclone: 10 + workers/4 + 1), ` +
      `so no system has more connections than another. W1 seeds with each system's bulk insert (Cyclone enqueueMany, pg-boss insert, ` +
      `graphile-worker addJobs) and times only the drain, from the first handler start until the database shows every job completed. ` +
      `W3 measures from just before the enqueue call to the handler's start, both in one process.`,
  );
  out.push('');
  return out.join('\n');
}
