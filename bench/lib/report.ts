import type { CrashParams, CrashResult } from '../crash.js';
import { DASHBOARD_BUDGET_MS, type DashboardResult } from '../dashboard.js';
import type { FleetParams, FleetResult } from '../fleet.js';
import type { W11Form, W11Params, W11Result } from '../workflows.js';
import type { SoakResult } from '../soak.js';
import { CYCLONE_VARIANTS, type SystemName } from '../runners/types.js';
import type { HeldXminParams, HeldXminResult } from '../held-xmin.js';
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
  /** W7, when it ran. */
  soak?: SoakResult;
  /** W6: the runs on history and, in reports that have it, the same workloads on empty tables, each run beside one of them. */
  history: { rows: number; seed?: Record<string, number>; runs: WorkloadResult[]; empty?: WorkloadResult[] };
  dashboard?: DashboardResult;
  /** W11, when it ran. */
  w11?: { params: W11Params; runs: W11Result[] };
  /** W10, the idle fleet, when it ran (with `--dispatch=redis`, or listed in --workloads). */
  fleet?: { params: FleetParams; runs: FleetResult[] };
  /** W12, the queue under held-back vacuum, when it ran (listed in --workloads). */
  w12?: { params: HeldXminParams; runs: HeldXminResult[] };
  /** The bench's redis-server, when broker dispatch ran. */
  redis?: { version: string };
}

const LABEL: Record<SystemName, string> = {
  cyclone: 'Cyclone',
  'cyclone-observed': 'Cyclone observed',
  'cyclone-redis': 'Cyclone (Redis dispatch)',
  'pg-boss': 'pg-boss',
  'pg-boss-batch': 'pg-boss (batch profile)',
  'graphile-worker': 'graphile-worker',
  bullmq: 'BullMQ',
};

interface Row {
  workload: WorkloadName;
  title: string;
  metric: string;
  key: string;
  higherIsBetter: boolean;
  ceiling: boolean;
  /** Cyclone's own row, compared with the peers' figures of this workload (W1R0 with their W1). */
  peersFrom?: WorkloadName;
}

function rows(p: Record<WorkloadName, WorkloadParams>): Row[] {
  const n = (x: number) => x.toLocaleString('en-US');
  return [
    { workload: 'W1', title: `W1 drain ${n(p.W1.jobs)} queued no-op jobs, ${p.W1.workers} workers`, metric: 'jobs/s', key: 'jobsPerSec', higherIsBetter: true, ceiling: true },
    { workload: 'W1R0', title: 'W1R0 = W1 with retention: 0 (a completed job is deleted as it completes)', metric: 'jobs/s', key: 'jobsPerSec', higherIsBetter: true, ceiling: true, peersFrom: 'W1' },
    { workload: 'W2', title: `W2 ${n(p.W2.jobs)} single enqueues, ${p.W2.callers} concurrent callers`, metric: 'enqueues/s', key: 'enqueuesPerSec', higherIsBetter: true, ceiling: true },
    { workload: 'W3', title: `W3 enqueue→start, ${n(p.W3.jobs)} jobs ${p.W3.intervalMs} ms apart, ${p.W3.workers} idle workers`, metric: 'p50 ms', key: 'p50Ms', higherIsBetter: false, ceiling: false },
    { workload: 'W3', title: '', metric: 'p95 ms', key: 'p95Ms', higherIsBetter: false, ceiling: false },
    { workload: 'W3', title: '', metric: 'p99 ms', key: 'p99Ms', higherIsBetter: false, ceiling: false },
    { workload: 'W3', title: '', metric: 'of which the enqueue call, p50 ms', key: 'enqueueP50Ms', higherIsBetter: false, ceiling: false },
    { workload: 'W3', title: '', metric: 'handler start after the enqueue returned, p50 ms', key: 'afterReturnP50Ms', higherIsBetter: false, ceiling: false },
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
  const peers = r.systems.filter((s) => s !== 'cyclone' && !CYCLONE_VARIANTS.includes(s));
  const hasCyclone = r.systems.includes('cyclone');
  const observed = hasCyclone && r.systems.includes('cyclone-observed');
  const dispatched = hasCyclone && r.systems.includes('cyclone-redis');
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
  if (observed) {
    out.push(
      'Cyclone observed is Cyclone with CycloneMetricsModule beside it and OpenTelemetry spans on (`tracing: true`, no SDK ' +
        'registered: the API\'s no-op tracer); observed/Cyclone is its median ÷ plain Cyclone\'s, the cost of observability ' +
        '(at least 0.95 on W1 and W2 throughput is the target).',
    );
  }
  if (dispatched) {
    out.push(
      'Cyclone (Redis dispatch) is Cyclone with broker dispatch on (`dispatch: { redis: { url } }`, defaults otherwise: one shard), ' +
        `on a redis-server ${r.redis?.version ?? ''} of the bench's own without persistence, emptied (FLUSHALL) before each run: ` +
        'steps reach the workers through the outbox and a Redis stream instead of polling. Redis dispatch/Cyclone is its median ÷ ' +
        "plain Cyclone's. Steps of a kind with a concurrency limit are claimed from PostgreSQL with dispatch on too, so W8 and W1L are not run for it.",
    );
  }
  out.push('');
  const header = ['workload', 'metric', ...r.systems.map((x) => LABEL[x])];
  if (hasCyclone) for (const p of peers) header.push(`Cyclone/${LABEL[p]}`);
  if (hasCyclone) header.push('Cyclone/ceiling');
  if (observed) header.push('observed/Cyclone');
  if (dispatched) header.push('Redis dispatch/Cyclone');
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
      const peerMedian = (p: SystemName) =>
        row.peersFrom ? valuesOf(r.runs, p, row.peersFrom, row.key).median : (medians[p] ?? NaN);
      for (const p of peers) cells.push(ratio(medians.cyclone ?? NaN, peerMedian(p)));
      cells.push(row.ceiling ? ratio(medians.cyclone ?? NaN, tps.median) : '');
    }
    if (observed) cells.push(ratio(medians['cyclone-observed'] ?? NaN, medians.cyclone ?? NaN));
    if (dispatched) cells.push(ratio(medians['cyclone-redis'] ?? NaN, medians.cyclone ?? NaN));
    out.push(`| ${cells.join(' | ')} |`);
  }
  out.push(`| ceiling: pgbench simple-update, ${r.pgbench.clients} clients | tps | ${fmtSpread(tps)} |${' |'.repeat(header.length - 3)}`);
  out.push('');
  const limited = valuesOf(r.runs, 'cyclone', 'W1L', 'jobsPerSec');
  const plain = valuesOf(r.runs, 'cyclone', 'W1', 'jobsPerSec');
  if (Number.isFinite(limited.median) && Number.isFinite(plain.median)) {
    // Cyclone's variants say why they skip W8 in their own paragraph above.
    const skipped = r.systems
      .filter((x) => !CYCLONE_VARIANTS.includes(x) && r.configs[x]?.W8?.startsWith('not run'))
      .map((x) => `${LABEL[x]}: ${r.configs[x]!.W8!.slice('not run: '.length)}`);
    out.push(
      `Flow control: Cyclone's W1 with a concurrency limit that never binds (W1L) runs at ${ratio(limited.median, plain.median)} of W1 ` +
        '(the target is 0.9 or better).' +
        (skipped.length ? ` W8 runs only where the installed version has per-key concurrency limits in open source (${skipped.join('; ')}).` : ''),
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
      `**W5 crash** — ${cp.jobs.toLocaleString('en-US')} jobs of ${cp.jobMsMax === undefined ? cp.jobMs : `${cp.jobMs}–${cp.jobMsMax}`} ms, ` +
        `${cp.processes} worker processes × ${cp.workersPerProcess} workers; ` +
        `during the first ${cp.killPhaseMs / 1000} s of the run the process that has been up longest is SIGKILLed every ${cp.killEveryMs / 1000} s ` +
        `and a new one started at once; then the workers are left to finish. Each handler records its invocation, ` +
        `then writes a side effect keyed by job and fenced by the job's token (Cyclone: fencingToken; pg-boss: retryCount; ` +
        `graphile-worker: attempts; BullMQ: attemptsStarted). One run per system.`,
    );
    out.push('');
    out.push('| system | kills | lost | unfinished | applied twice | extra invocations | fenced writes refused | jobs held by killed workers | of them claimable again in the run | kill→claimable p50 | p99 | worker boot p50 | run |');
    out.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const c of r.crash) {
      if (c.kills === undefined) {
        out.push(`| ${LABEL[c.system]} | failed: ${c.error} ||||||||||`);
        continue;
      }
      const claim = (v: number) => (Number.isFinite(v) ? `${fmt(v / 1000)} s` : 'never');
      out.push(
        `| ${LABEL[c.system]} | ${c.kills} | ${c.lost} | ${c.unfinished ?? ''} | ${c.appliedTwice} | ${c.extraInvocations} | ${c.fencingRejected} | ` +
          `${c.stranded} | ${c.strandedFreed} | ${claim(c.killToClaimableP50Ms)} | ${claim(c.killToClaimableP99Ms)} | ` +
          `${claim(c.bootP50Ms)} | ` +
          `${fmt(c.runMs / 1000)} s${c.error ? ` (${c.error})` : c.ended ? ` (ended: ${c.ended})` : ''} |`,
      );
    }
    const notes = r.crash.filter((c) => c.claimableNote).map((c) => `${LABEL[c.system]}: ${c.claimableNote}.`);
    out.push('');
    out.push(
      '"Lost" is jobs the system had accepted that neither completed nor were still waiting when the run ended (all done, or no completion for ' +
        `${cp.stallMs / 1000} s after the kill phase); "unfinished" is jobs still queued or running then. "Applied twice" is jobs whose fenced side effect was accepted twice: a worker killed ` +
        'after the effect committed but before the completion did is re-run with a higher token. ' +
        'Kill→claimable is measured per job from the SIGKILL to the moment the database shows the job no longer held by the dead process. ' +
        notes.join(' '),
    );
    out.push('');
    if (cp.faults && cp.produce) {
      const f = cp.faults;
      out.push(
        `**W5 database faults**, in the same run: ${cp.produce.jobs.toLocaleString('en-US')} more jobs enqueued one at a time ` +
          `(${fmt(1000 / cp.produce.intervalMs)} a second, each at its time) by a producer process of the system's; at ${f.listenKillAtMs / 1000} s every LISTEN backend ` +
          `of the system is terminated (pg_terminate_backend); at ${f.restartAtMs / 1000} s the server is crashed (SIGQUIT to the ` +
          `postmaster: no checkpoint, crash recovery at the next start) and started again ${f.downMs / 1000} s later. No worker ` +
          'process is killed while the server is down. A system survives when no worker process exits on its own and every job it accepted completes once.',
      );
      out.push('');
      out.push('| system | LISTEN backends terminated | server down, start | enqueues: returned / refused | refused, by error | refused but committed | worker processes that exited on their own | lost | unfinished | applied twice | drain after the server was back | pickup p50 / p95 / p99 |');
      out.push('| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
      for (const c of r.crash) {
        if (!c.faults || !c.produced) continue;
        const refused = Object.values(c.produced.refused).reduce((a, b) => a + b, 0);
        const byError = Object.entries(c.produced.refused)
          .sort((a, b) => b[1] - a[1])
          .map(([k, n]) => `${n} ${k.replace(/\|/g, '\\|')}`)
          .join('; ');
        const drain = c.faults.drainAfterServerBackMs === null ? 'never' : `${fmt(c.faults.drainAfterServerBackMs / 1000)} s`;
        out.push(
          `| ${LABEL[c.system]} | ${c.faults.listenersKilled} | ${fmt(c.faults.serverDownMs / 1000)} s, ${fmt(c.faults.serverStartMs / 1000)} s | ` +
            `${c.produced.ok} / ${refused} | ${byError || '—'} | ${c.produced.refusedButCommitted ?? 'not knowable'} | ${c.workerExits} | ` +
            `${c.lost} | ${c.unfinished} | ${c.appliedTwice} | ${drain} | ${pickup(c.pickup)} |`,
        );
      }
      out.push('');
      out.push(
        '"Refused but committed": enqueues whose caller got an error although the job was written (the connection dropped after the commit); ' +
          "Cyclone's OutcomeUnknownError carries the run ids, which are looked up; the peers' errors carry none. " +
          'Drain: from the server accepting connections again until every job was done. ' +
          "Pickup: each produced job's wait from the producer's enqueue call to its handler's first line, through the kills and the faults.",
      );
      out.push('');
    }
  }

  if (r.fleet?.runs.length) out.push(...renderFleet(r.fleet, r.reps));
  if (r.w12?.runs.length) out.push(...renderHeldXmin(r.w12));

  if (r.soak) {
    const k = r.soak;
    const p = k.params;
    const mb = (x: number) => `${fmt(x)} MB`;
    out.push(
      `**W7 soak** — Cyclone: ${p.jobs.toLocaleString('en-US')} jobs enqueued at a steady ${p.ratePerSec.toLocaleString('en-US')}/s ` +
        `(enqueueMany every 100 ms) and run by ${p.processes} worker processes × ${p.workersPerProcess} workers, retention ${p.retention} ` +
        `(finished runs deleted as it goes); ${fmt(k.runMs / 1000)} s. Handled ${k.handled.toLocaleString('en-US')} of ` +
        `${k.enqueued.toLocaleString('en-US')} enqueued; ${k.refusedEnqueues} enqueues refused; ${k.errors} errors and ${k.warnings} warnings logged; ` +
        `left unfinished ${k.leftover.unfinished}, failed ${k.leftover.failed}` +
        (k.error ? `; ${k.error}` : '') +
        '. Memory of each process after a full GC (heap used) and its RSS, at its first sample, after the ' +
        `${p.warmupMs / 1000} s warm-up ("start") and at the end:`,
    );
    out.push('');
    out.push('| process | heap first | heap start | heap end | end ÷ start | RSS first | RSS start | RSS end | end ÷ start |');
    out.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const x of k.processes) {
      out.push(
        `| ${x.role} ${x.pid} | ${mb(x.first.heapMb)} | ${mb(x.start.heapMb)} | ${mb(x.end.heapMb)} | ${fmt(x.heapRatio)} | ` +
          `${mb(x.first.rssMb)} | ${mb(x.start.rssMb)} | ${mb(x.end.rssMb)} | ${fmt(x.rssRatio)} |`,
      );
    }
    out.push('');
    const t = k.tables;
    const row = (name: string, x: typeof t.start) =>
      `| ${name} (${fmt(x.atMs / 1000)} s) | ${mb(x.runsMb)} | ${mb(x.stepsMb)} | ${mb(x.indexesMb)} | ${x.liveRuns.toLocaleString('en-US')} | ${x.deadTuples.toLocaleString('en-US')} | ${x.backlog} |`;
    out.push('| tables | cyclone_runs | cyclone_steps | their indexes | live runs | dead tuples | backlog |');
    out.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
    out.push(row('start', t.start));
    out.push(row('largest', t.max));
    out.push(row('end', t.end));
    out.push('');
    out.push(
      `Throughput while the producer ran, after the warm-up (jobs handled a second, per ${p.sampleEveryMs / 1000} s interval): ` +
        `min ${fmt(k.throughputSummary.min)}, median ${fmt(k.throughputSummary.p50)}, max ${fmt(k.throughputSummary.max)}; over time: ` +
        k.throughput.map((x) => `${fmt(x.atMs / 1000)} s ${fmt(x.jobsPerSec)}`).join(', ') +
        '.',
    );
    out.push('');
  }

  if (r.history.runs.length) {
    const h = r.history;
    const beside = h.empty?.length ? h.empty : undefined;
    const ok = (runs: WorkloadResult[], w: WorkloadName) => runs.filter((x) => x.workload === w && x.ok && x.values);
    const hist = (w: WorkloadName, key: string) => spread(ok(h.runs, w).map((x) => x.values[key]));
    const empty = (w: WorkloadName, key: string) =>
      beside ? spread(ok(beside, w).map((x) => x.values[key])) : valuesOf(r.runs, 'cyclone', w, key);
    // With empty runs beside, the ratio is the median of each repetition's own
    // pair, so the machine's drift over the run cancels out.
    const pairRatio = (w: WorkloadName, key: string): string => {
      if (!beside) return ratio(hist(w, key).median, empty(w, key).median);
      const byRep = new Map(ok(beside, w).map((x) => [x.rep, x.values[key]]));
      const ratios = ok(h.runs, w).flatMap((x) => {
        const e = byRep.get(x.rep);
        return e === undefined ? [] : [x.values[key] / e];
      });
      const m = spread(ratios);
      return m.n === 0 ? 'n/a' : `${m.median.toFixed(2)}×` + (m.n > 1 ? ` [${m.min.toFixed(2)}–${m.max.toFixed(2)}]` : '');
    };
    const row = (label: string, w: WorkloadName, key: string) =>
      `| ${label} | ${fmtSpread(empty(w, key))} | ${fmtSpread(hist(w, key))} | ${pairRatio(w, key)} |`;
    out.push(
      `**W6 history** — Cyclone with ${h.rows.toLocaleString('en-US')} completed runs (and their steps) already in its tables` +
        (h.seed
          ? `, spread over ${h.seed.months} monthly partitions (of ${h.seed.partitions}), and ${(h.seed.waiting ?? 0).toLocaleString('en-US')} ` +
            'runs waiting on a delay or a retry (due 1 to 30 days ahead)'
          : '') +
        ', inserted with SQL, vacuumed, analysed and checkpointed' +
        (h.seed ? ` (tables ${fmt((h.seed.runsBytes + h.seed.stepsBytes) / 2 ** 20)} MB)` : '') +
        '; each run after autovacuum caught up with the one before, as in a system that runs on' +
        (beside
          ? "; each repetition beside the same workload on a fresh database (empty tables; which runs first alternates), and the ratio is the median " +
            "of the repetitions' own history ÷ empty [their range] (for W3 latency, below 1 is better)."
          : '; ratio to the same workload on empty tables above (for W3 latency, below 1 is better).'),
    );
    out.push('');
    out.push('| workload | empty tables | with history | history ÷ empty |');
    out.push('| --- | ---: | ---: | ---: |');
    out.push(row('W1 drain, jobs/s', 'W1', 'jobsPerSec'));
    out.push(row('W2 enqueue, enqueues/s', 'W2', 'enqueuesPerSec'));
    out.push(row('W3 enqueue→start p50, ms', 'W3', 'p50Ms'));
    out.push(row('W3 enqueue→start p99, ms', 'W3', 'p99Ms'));
    out.push('');
  }

  if (r.dashboard?.calls) {
    const d = r.dashboard;
    out.push(
      `**W9 dashboard** — the dashboard's JSON API with ${d.seed.runs.toLocaleString('en-US')} runs ` +
        `(${d.seed.steps.toLocaleString('en-US')} steps, ${fmt((d.seed.runsBytes + d.seed.stepsBytes) / 2 ** 20)} MB) in Cyclone's tables: ` +
        'a week of mostly completed jobs of 8 kinds on 4 queues, 2 % failed, 1 % cancelled, 1.5 % queued, 0.1 % running, 0.4 % paused, ' +
        'a tenth with unique keys, and 1 % workflow runs of 4 nodes; inserted with SQL, vacuumed and analysed. Each call is timed ' +
        `on the server (its Server-Timing header) over ${r.quick ? 10 : 30} calls after 3 warm-ups; the budget is ${DASHBOARD_BUDGET_MS} ms.` +
        (d.ok ? '' : ` NOT OK: ${d.error}.`),
    );
    out.push('');
    out.push('| API call | path | runs answered | server p50 ms | server p95 ms | server max ms | round trip p50 ms |');
    out.push('| --- | --- | ---: | ---: | ---: | ---: | ---: |');
    for (const c of d.calls) {
      out.push(
        `| ${c.name} | \`${c.path.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, '<id>')}\` | ${c.rows ?? ''} | ${fmt(c.serverP50Ms)} | ${fmt(c.serverP95Ms)} | ` +
          `${fmt(c.serverMaxMs)} | ${fmt(c.roundTripP50Ms)} |`,
      );
    }
    out.push('');
  }

  if (r.w11?.runs.length) out.push(...renderW11(r.w11));

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
      `graphile-worker addJobs, BullMQ addBulk) and times only the drain, from the first handler start until the database shows every job completed. ` +
      `W3 measures from just before the enqueue call to the handler's start, both in one process.`,
  );
  out.push('');
  return out.join('\n');
}

const W11_LABEL: Record<W11Form, string> = {
  code: 'Cyclone, written as code',
  dag: 'Cyclone, as a DAG',
  dbos: 'DBOS Transact, queued workflows',
  inline: 'Cyclone, inline calls only',
};

/** W11's table: each form's runs/s, steps/s and statements, and the fan-out. */
function renderW11(w11: { params: W11Params; runs: W11Result[] }): string[] {
  const p = w11.params;
  const n = (x: number) => x.toLocaleString('en-US');
  const out: string[] = [];
  const of = (form: W11Form, key: string) => spread(w11.runs.filter((x) => x.form === form && x.ok).map((x) => x.values[key]));
  const code = (key: string) => of('code', key).median;
  out.push(
    `**W11 workflows** — ${n(p.runs)} runs of a workflow of ${p.stepsPerRun} steps (written as code: inline calls and steps of ` +
      `their own alternating, 5 each; as a DAG: a chain of ${p.stepsPerRun} step nodes; in DBOS Transact: ${p.stepsPerRun} ` +
      `DBOS.runStep in a workflow on a queue), started by 16 callers, ${p.workers} workers; then one run that fans out ` +
      `${n(p.fanOut)} steps at once. Statements are pg_stat_statements' top-level calls in the run's database; ` +
      '"record" counts those of cyclone_record_nodes, the one statement that records a batch of a code workflow\'s calls.',
  );
  out.push('');
  out.push('| form | runs/s | steps/s | code ÷ form | statements a run | record statements a run | fan-out ms | fan-out steps/s | code ÷ form | fan-out statements | fan-out record statements |');
  out.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const form of ['code', 'dag', 'dbos', 'inline'] as W11Form[]) {
    const runs = w11.runs.filter((x) => x.form === form);
    if (!runs.length) continue;
    if (!runs.some((x) => x.ok)) {
      out.push(`| ${W11_LABEL[form]} | failed: ${runs[0].error ?? 'no result'} | | | | | | | | | |`);
      continue;
    }
    const fan = of(form, 'fanOutMs');
    out.push(
      `| ${W11_LABEL[form]} | ${fmtSpread(of(form, 'runsPerSec'))} | ${fmtSpread(of(form, 'stepsPerSec'))} | ` +
        `${form === 'code' || form === 'inline' ? '' : ratio(code('stepsPerSec'), of(form, 'stepsPerSec').median)} | ` +
        `${fmtSpread(of(form, 'statementsPerRun'))} | ${fmtSpread(of(form, 'recordStatementsPerRun'))} | ` +
        `${fan.n ? fmtSpread(fan) : ''} | ${fan.n ? fmtSpread(of(form, 'fanOutStepsPerSec')) : ''} | ` +
        `${fan.n && form !== 'code' ? ratio(code('fanOutStepsPerSec'), of(form, 'fanOutStepsPerSec').median) : ''} | ` +
        `${fan.n ? fmtSpread(of(form, 'fanOutStatements')) : ''} | ${fan.n ? fmtSpread(of(form, 'fanOutRecordStatements')) : ''} |`,
    );
  }
  out.push('');
  for (const form of ['code', 'dag', 'dbos', 'inline'] as W11Form[]) {
    const run = w11.runs.find((x) => x.form === form && x.ok);
    if (run) out.push(`- ${W11_LABEL[form]}: ${run.config}`);
  }
  out.push('');
  return out;
}

/** W10's table: what each mode's idle fleet costs PostgreSQL (and Redis), and how fast it drains a batch. */
function renderFleet(fleet: { params: FleetParams; runs: FleetResult[] }, reps: number): string[] {
  const p = fleet.params;
  const n = (x: number) => x.toLocaleString('en-US');
  const modes = ['cyclone', 'cyclone-redis'] as SystemName[];
  const of = (system: SystemName, value: (x: FleetResult) => number | undefined) =>
    spread(fleet.runs.filter((x) => x.system === system && x.ok).map(value).filter((v): v is number => v !== undefined));
  // Connections are counts: shown whole, not to three significant digits.
  const whole = (v: Spread) => {
    const k = (x: number) => Math.round(x).toLocaleString('en-US');
    return v.n === 0 ? 'n/a' : v.n === 1 ? k(v.median) : `${k(v.median)} [${k(v.min)}–${k(v.max)}]`;
  };
  const columns: { head: string; value: (x: FleetResult) => number | undefined; ratio: boolean; count?: boolean }[] = [
    { head: 'idle: statements/s ↓', value: (x) => x.idle.statementsPerSec, ratio: true },
    { head: 'idle: commits/s ↓', value: (x) => x.idle.commitsPerSec, ratio: true },
    { head: 'idle: connections held ↓', value: (x) => x.idle.connections, ratio: true, count: true },
    { head: 'idle: Redis commands/s', value: (x) => x.idle.redisCommandsPerSec, ratio: false },
    { head: 'drain: jobs/s ↑', value: (x) => x.drain.jobsPerSec, ratio: true },
    { head: 'drain: most connections', value: (x) => x.drain.connectionsMax, ratio: true, count: true },
    { head: 'jobs a process, min–max', value: () => undefined, ratio: false },
    { head: 'errors / warnings logged', value: () => undefined, ratio: false },
  ];
  const out: string[] = [];
  out.push(
    `**W10 idle fleet** — ${p.processes} worker processes × ${p.workersPerProcess} workers of Cyclone (one queue, defaults otherwise), ` +
      `each mode on a fresh database (and, with dispatch, a fresh Redis); once every process is ready and ${p.settleMs / 1000} s have passed, ` +
      `${p.idleMs / 1000} s with nothing to do, then a producer process enqueues ${n(p.jobs)} no-op jobs (enqueueMany, ${n(p.chunk)} at a time) ` +
      `and the fleet drains them. Statements/s: top-level statements of the run's database over the idle window (pg_stat_statements calls, ` +
      "the bench's own left out; BEGIN and COMMIT count); commits/s: pg_stat_database's xact_commit over the same window (a backend " +
      'reports it up to a second late, so it is the rougher of the two); connections: pg_stat_activity for the database at the end of the ' +
      'window; Redis commands/s: INFO stats over the window. Drain: from the producer being told to start to the database showing every job ' +
      `completed. ${reps > 1 ? `Median [min–max] of ${reps} runs a mode, the modes alternating which goes first.` : 'One run a mode.'}`,
  );
  out.push('');
  out.push(`| mode | ${columns.map((c) => c.head).join(' | ')} |`);
  out.push(`| --- | ${columns.map(() => '---:').join(' | ')} |`);
  for (const system of modes) {
    const runs = fleet.runs.filter((x) => x.system === system);
    if (!runs.length) continue;
    const ok = runs.filter((x) => x.ok);
    if (!ok.length) {
      out.push(`| ${LABEL[system]} | failed: ${runs[0].error ?? 'no result'} |${' |'.repeat(columns.length - 1)}`);
      continue;
    }
    const cells = columns.map((c) => (c.count ? whole(of(system, c.value)) : fmtSpread(of(system, c.value))));
    cells[columns.length - 2] = `${Math.min(...ok.map((x) => x.handledPerProcess.min))}–${Math.max(...ok.map((x) => x.handledPerProcess.max))}`;
    cells[columns.length - 1] = `${ok.reduce((a, x) => a + x.errors, 0)} / ${ok.reduce((a, x) => a + x.warnings, 0)}`;
    out.push(`| ${LABEL[system]}${ok.length < runs.length ? ` (${runs.length - ok.length} failed)` : ''} | ${cells.join(' | ')} |`);
  }
  if (modes.every((m) => fleet.runs.some((x) => x.system === m && x.ok))) {
    const cells = columns.map((c) => (c.ratio ? ratio(of('cyclone-redis', c.value).median, of('cyclone', c.value).median) : ''));
    out.push(`| Redis dispatch/Cyclone | ${cells.join(' | ')} |`);
  }
  out.push('');
  for (const system of modes) {
    const run = fleet.runs.find((x) => x.system === system && x.ok);
    if (!run) continue;
    const top = run.idle.statements
      .slice(0, 5)
      .map((st) => `\`${st.query.slice(0, 80).replace(/\|/g, '\\|')}\` ${fmt(st.calls / run.idle.seconds)}/s`)
      .join('; ');
    const apps = Object.entries(run.idle.byApplication)
      .map(([app, k]) => `${k} ${app}`)
      .join(', ');
    out.push(`- ${LABEL[system]}: ${run.config}. Idle connections: ${apps || 'none'}. Idle statements, most first: ${top || 'none'}.`);
  }
  out.push('');
  return out;
}

/** A W5 run's pickup waits, as a table cell. */
function pickup(p: { p50Ms: number; p95Ms: number; p99Ms: number } | undefined): string {
  return p ? `${fmt(p.p50Ms)} / ${fmt(p.p95Ms)} / ${fmt(p.p99Ms)} ms` : '—';
}

/** W12: each system's run free and under a held xmin, first window against last. */
function renderHeldXmin(w12: { params: HeldXminParams; runs: HeldXminResult[] }): string[] {
  const p = w12.params;
  const out = [
    `**W12 held-back vacuum** — ${p.ratePerSec.toLocaleString('en-US')} no-op jobs a second, enqueued with the system's bulk insert every 10 ms, run by ${p.workers} workers ` +
      `of the same process for ${p.seconds} s: free (nothing holds the xmin), and held (a REPEATABLE READ transaction, its snapshot ` +
      "taken, open from the start to the end: no row that dies during the run can be vacuumed); Cyclone also held with `retention: 0`. " +
      `Throughput and the wait from the enqueue call to the handler's first line, in the first and the last ${p.windowSeconds} s; ` +
      'dead rows and sizes of every table and index of the database at the end (pg_stat_user_tables).',
    '',
    '| system | mode | jobs/s first → last | wait p50 first → last | wait p99 first → last | p99 over the run | dead rows | tables | indexes |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of w12.runs) {
    if (!r.windows?.length) {
      out.push(`| ${LABEL[r.system]} | ${r.mode} | failed: ${r.error} |||||||`);
      continue;
    }
    const first = r.windows[0];
    const last = r.windows[r.windows.length - 1];
    out.push(
      `| ${LABEL[r.system]} | ${r.mode} | ${fmt(first.jobsPerSec)} → ${fmt(last.jobsPerSec)} | ${fmt(first.p50Ms)} → ${fmt(last.p50Ms)} ms | ` +
        `${fmt(first.p99Ms)} → ${fmt(last.p99Ms)} ms | ${fmt(r.p99Ms)} ms | ${r.deadRows.toLocaleString('en-US')} | ${fmt(r.tablesMb)} MB | ` +
        `${fmt(r.indexesMb)} MB${r.error ? ` (${r.error})` : ''} |`,
    );
  }
  out.push('');
  return out;
}
