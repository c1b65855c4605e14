/**
 * W11: workflows written as code beside the same work as a DAG and as DBOS
 * Transact's queued workflows. Each form runs in its own process on a fresh
 * database (child.ts, mode 'w11'): `runs` runs of a workflow of `stepsPerRun`
 * steps (a code workflow's alternate between inline calls and steps of their
 * own), then one run of a fan-out of `fanOut` steps; runs/s and steps/s of
 * each, and what pg_stat_statements counted: the statements a run cost, and
 * those that recorded its calls (cyclone_record_nodes). The `inline` form
 * (inline calls only) shows what one recorded inline call costs.
 */
import pg from 'pg';
import { resetStatements, topStatements, type StatementStat } from './lib/diagnostics.js';
import type { W11Driver } from './runners/cyclone-workflows.js';
import type { ChildContext } from './workloads.js';

export type W11Form = 'code' | 'dag' | 'inline' | 'dbos';
export const W11_FORMS: W11Form[] = ['code', 'dag', 'dbos', 'inline'];

export interface W11Params {
  runs: number;
  stepsPerRun: number;
  fanOut: number;
  workers: number;
  timeoutMs: number;
}

export interface W11Result {
  form: W11Form;
  ok: boolean;
  error?: string;
  config: string;
  rep?: number;
  values: Record<string, number>;
  statements: StatementStat[];
}

const now = () => performance.now();

/** Top-level statements of the database since the last reset, in all and those whose text holds `pattern`. */
async function counted(admin: pg.Client, database: string, pattern: string): Promise<{ all: number; matching: number }> {
  const { rows } = await admin.query(
    `/* bench */ SELECT coalesce(sum(s.calls), 0)::bigint AS all_calls,
            coalesce(sum(s.calls) FILTER (WHERE s.query LIKE $2), 0)::bigint AS matching
       FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
      WHERE d.datname = $1 AND s.toplevel AND s.query NOT ILIKE '%bench%'`,
    [database, `%${pattern}%`],
  );
  return { all: Number(rows[0].all_calls), matching: Number(rows[0].matching) };
}

async function driverOf(form: W11Form, url: string, p: W11Params): Promise<W11Driver> {
  const shape = { stepsPerRun: p.stepsPerRun, fanOut: p.fanOut, workers: p.workers };
  if (form === 'dbos') {
    // The peer's runner lives in bench/peers (compiled by tsconfig.bench.json only).
    const peer: { startDbosW11: (url: string, s: typeof shape) => Promise<W11Driver> } = await import(
      new URL('./peers/dbos.js', import.meta.url).href
    );
    return peer.startDbosW11(url, shape);
  }
  return (await import('./runners/cyclone-workflows.js')).startCycloneW11(url, form, shape);
}

export async function w11(form: W11Form, ctx: ChildContext, p: W11Params): Promise<W11Result> {
  const admin = new pg.Client({ connectionString: ctx.adminUrl, application_name: 'bench' });
  await admin.connect();
  try {
    const driver = await driverOf(form, ctx.url, p);
    try {
      // Not timed: the first runs open the pools' connections and plan the statements.
      await driver.chain(Math.min(20, p.runs));
      await resetStatements(admin);
      const t0 = now();
      await driver.chain(p.runs);
      const chainMs = now() - t0;
      const chain = await counted(admin, ctx.database, 'cyclone_record_nodes(');
      const statements = await topStatements(admin, ctx.database);
      const values: Record<string, number> = {
        runsPerSec: p.runs / (chainMs / 1000),
        stepsPerSec: (p.runs * p.stepsPerRun) / (chainMs / 1000),
        chainMs,
        statementsPerRun: chain.all / p.runs,
        recordStatementsPerRun: chain.matching / p.runs,
      };
      if (form !== 'inline') {
        await resetStatements(admin);
        const t1 = now();
        await driver.fanOut();
        const fanOutMs = now() - t1;
        const fan = await counted(admin, ctx.database, 'cyclone_record_nodes(');
        Object.assign(values, {
          fanOutMs,
          fanOutStepsPerSec: p.fanOut / (fanOutMs / 1000),
          fanOutStatements: fan.all,
          fanOutRecordStatements: fan.matching,
        });
      }
      return { form, ok: true, config: driver.describe, values, statements };
    } finally {
      await driver.stop();
    }
  } finally {
    await admin.end();
  }
}
