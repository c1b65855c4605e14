import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

/** Ticks per second of /proc CPU counters (USER_HZ; 100 on Linux). */
const HZ = 100;

/** CPU seconds used by the PostgreSQL server: live processes plus reaped children. */
export function postgresCpuSeconds(dataDir: string): number {
  let postmaster: number;
  try {
    postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return NaN;
  }
  let ticks = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    // Fields after the parenthesised command: state ppid ... utime(14) stime(15) cutime(16) cstime(17).
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const pid = Number(entry);
    const ppid = Number(rest[1]);
    if (pid !== postmaster && ppid !== postmaster) continue;
    ticks += Number(rest[11]) + Number(rest[12]);
    if (pid === postmaster) ticks += Number(rest[13]) + Number(rest[14]);
  }
  return ticks / HZ;
}

/** Busy and total CPU seconds of the whole machine, from /proc/stat. */
export function machineCpu(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  const idle = v[3] + (v[4] ?? 0);
  return { busy: (total - idle) / HZ, total: total / HZ };
}

export interface CpuMark {
  at: number;
  self: NodeJS.CpuUsage;
  postgres: number;
  machine: { busy: number; total: number };
}

export function cpuMark(dataDir: string): CpuMark {
  return { at: performance.now(), self: process.cpuUsage(), postgres: postgresCpuSeconds(dataDir), machine: machineCpu() };
}

export interface CpuSplit {
  wallSeconds: number;
  /** CPU seconds of this Node process (the system under test's client side). */
  nodeSeconds: number;
  postgresSeconds: number;
  machineBusySeconds: number;
  /** Cores in use on average: node, postgres. */
  nodeCores: number;
  postgresCores: number;
  /** Cores busy with anything else on the machine (other processes, kernel work): noise in the measurement. */
  otherCores: number;
}

export function cpuSplit(a: CpuMark, b: CpuMark): CpuSplit {
  const wall = (b.at - a.at) / 1000;
  const node = (b.self.user - a.self.user + b.self.system - a.self.system) / 1e6;
  const postgres = b.postgres - a.postgres;
  return {
    wallSeconds: wall,
    nodeSeconds: node,
    postgresSeconds: postgres,
    machineBusySeconds: b.machine.busy - a.machine.busy,
    nodeCores: node / wall,
    postgresCores: postgres / wall,
    otherCores: Math.max(0, (b.machine.busy - a.machine.busy - node - postgres) / wall),
  };
}

export interface DbCounters {
  commits: number;
  rollbacks: number;
  walLsn: string;
  /** WAL fsyncs of the whole server (pg_stat_io, PostgreSQL 16+; NaN where unavailable). */
  walFsyncs: number;
}

/** Commit counters of one database and the WAL position. Stats of exited backends are flushed. */
export async function dbCounters(client: pg.Client | pg.Pool, database: string): Promise<DbCounters> {
  const { rows } = await client.query(
    `/* bench */ SELECT xact_commit::bigint AS commits, xact_rollback::bigint AS rollbacks,
            pg_current_wal_insert_lsn()::text AS lsn
       FROM pg_stat_database WHERE datname = $1`,
    [database],
  );
  let walFsyncs = NaN;
  try {
    const { rows: io } = await client.query(
      `/* bench */ SELECT COALESCE(sum(fsyncs), 0)::bigint AS n FROM pg_stat_io WHERE object = 'wal'`,
    );
    walFsyncs = Number(io[0].n);
  } catch {
    // pg_stat_io has no WAL rows before PostgreSQL 18.
  }
  return { commits: Number(rows[0].commits), rollbacks: Number(rows[0].rollbacks), walLsn: rows[0].lsn, walFsyncs };
}

/**
 * Samples what the database's active backends wait on, a few times a second,
 * until stopped: the share of samples per wait event shows where a workload
 * queues (locks, WAL flushes, client round trips).
 */
export class WaitSampler {
  private samples = 0;
  private readonly counts = new Map<string, number>();
  private running = false;
  private loop?: Promise<void>;

  constructor(
    readonly client: pg.Client,
    private readonly database: string,
    private readonly everyMs = 50,
  ) {}

  start(): void {
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        const { rows } = await this.client.query(
          `/* bench */ SELECT COALESCE(wait_event_type || ':' || wait_event, 'CPU') AS w, count(*)::int AS n
             FROM pg_stat_activity
            WHERE datname = $1 AND state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend'
            GROUP BY 1`,
          [this.database],
        );
        // The heavyweight lock a committing transaction that sent NOTIFY holds on the
        // server's notification queue (PreCommit_Notify) shows as Lock:object on pg_database, object 0.
        const { rows: notify } = await this.client.query(
          `/* bench */ SELECT count(*)::int AS n FROM pg_locks
            WHERE locktype = 'object' AND classid = 'pg_database'::regclass AND objid = 0 AND NOT granted`,
        );
        this.samples += 1;
        for (const r of rows) this.counts.set(r.w, (this.counts.get(r.w) ?? 0) + r.n);
        const waiting = notify[0].n as number;
        this.counts.set('(of which waiting for the NOTIFY queue lock)', (this.counts.get('(of which waiting for the NOTIFY queue lock)') ?? 0) + waiting);
        await new Promise((resolve) => setTimeout(resolve, this.everyMs));
      }
    })();
  }

  /** Average number of active backends in each wait state, most first. */
  async stop(): Promise<Record<string, number>> {
    this.running = false;
    await this.loop;
    const out: Record<string, number> = {};
    for (const [k, v] of [...this.counts].sort((a, b) => b[1] - a[1])) out[k] = v / Math.max(1, this.samples);
    return out;
  }
}

export async function walBytesBetween(client: pg.Client | pg.Pool, a: string, b: string): Promise<number> {
  const { rows } = await client.query('/* bench */ SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::bigint AS d', [a, b]);
  return Number(rows[0].d);
}

export async function resetStatements(client: pg.Client | pg.Pool): Promise<void> {
  await client.query('/* bench */ SELECT pg_stat_statements_reset()');
}

export interface StatementStat {
  query: string;
  toplevel: boolean;
  calls: number;
  totalMs: number;
  meanMs: number;
  rows: number;
}

/** The statements of one database by total execution time (bench's own statements left out). */
export async function topStatements(client: pg.Client | pg.Pool, database: string, limit = 12): Promise<StatementStat[]> {
  const { rows } = await client.query(
    `/* bench */ WITH mine AS (
       SELECT s.query, s.toplevel, s.calls::bigint AS calls, s.total_exec_time AS total,
              s.mean_exec_time AS mean, s.rows::bigint AS rows
         FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
        WHERE d.datname = $1 AND s.query NOT ILIKE '%bench%')
     SELECT * FROM (SELECT * FROM mine ORDER BY total DESC LIMIT $2) by_time
     UNION
     SELECT * FROM (SELECT * FROM mine ORDER BY calls DESC LIMIT 8) by_calls
     ORDER BY total DESC`,
    [database, limit],
  );
  return rows.map((r) => ({
    query: String(r.query).replace(/\s+/g, ' ').slice(0, 300),
    toplevel: r.toplevel,
    calls: Number(r.calls),
    totalMs: Number(r.total),
    meanMs: Number(r.mean),
    rows: Number(r.rows),
  }));
}
