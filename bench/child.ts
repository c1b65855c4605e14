/**
 * One benchmark process: a workload of one system on one database, or a part
 * of the crash and history runs. The task comes in BENCH_TASK (JSON); a result
 * is written to task.resultPath.
 */
import { writeFileSync } from 'node:fs';
import { crashProducer, crashSeed, crashWorker, type CrashParams } from './crash.js';
import { runDashboard, type DashboardParams } from './dashboard.js';
import { fleetProducer, fleetWorker, type FleetParams } from './fleet.js';
import { heldXmin, type HeldXminMode, type HeldXminParams } from './held-xmin.js';
import type { SoakParams } from './soak.js';
import { seedHistory } from './history.js';
import { loadRunner } from './runners/load-runner.js';
import type { SystemName } from './runners/types.js';
import { WORKLOADS, type ChildContext, type WorkloadName, type WorkloadParams } from './workloads.js';
import { w11, type W11Form, type W11Params } from './workflows.js';

interface Task {
  mode:
    | 'workload'
    | 'crash-seed'
    | 'crash-worker'
    | 'crash-producer'
    | 'history-seed'
    | 'soak-worker'
    | 'soak-producer'
    | 'dashboard'
    | 'fleet-worker'
    | 'fleet-producer'
    | 'w11'
    | 'w12';
  system: SystemName;
  workload?: WorkloadName;
  ctx: ChildContext;
  params: unknown;
  resultPath?: string;
}

async function main(): Promise<void> {
  const task = JSON.parse(process.env.BENCH_TASK ?? '{}') as Task;
  const write = (value: unknown) => {
    if (task.resultPath) writeFileSync(task.resultPath, JSON.stringify(value, null, 2));
  };
  try {
    switch (task.mode) {
      case 'workload': {
        const runner = await loadRunner(task.system);
        const result = await WORKLOADS[task.workload!](runner, task.ctx, task.params as WorkloadParams);
        write(result);
        break;
      }
      case 'crash-seed':
        await crashSeed(await loadRunner(task.system), task.ctx, task.params as CrashParams);
        write({ ok: true });
        break;
      case 'crash-worker':
        await crashWorker(await loadRunner(task.system), task.ctx, task.params as CrashParams);
        break;
      case 'crash-producer':
        await crashProducer(await loadRunner(task.system), task.ctx, task.params as CrashParams);
        break;
      // Loaded only here: it loads Cyclone, which the peers' processes must not pay for.
      case 'soak-worker':
        await (await import('./soak.js')).soakWorker(task.ctx, task.params as SoakParams);
        break;
      case 'soak-producer':
        await (await import('./soak.js')).soakProducer(task.ctx, task.params as SoakParams);
        break;
      case 'history-seed': {
        const { rows, waiting } = task.params as { rows: number; waiting?: number };
        write({ ok: true, values: await seedHistory(task.ctx, rows, 7, waiting ?? 0) });
        break;
      }
      case 'fleet-worker':
        await fleetWorker(task.system, task.ctx, task.params as FleetParams);
        break;
      case 'fleet-producer':
        await fleetProducer(task.system, task.ctx, task.params as FleetParams);
        break;
      case 'dashboard':
        write(await runDashboard(task.ctx, task.params as DashboardParams));
        break;
      case 'w12': {
        const { mode, ...params } = task.params as HeldXminParams & { mode: HeldXminMode };
        write(await heldXmin(await loadRunner(task.system), task.ctx, mode, params));
        break;
      }
      case 'w11': {
        const { form, ...params } = task.params as W11Params & { form: W11Form };
        write(await w11(form, task.ctx, params));
        break;
      }
      default:
        throw new Error(`unknown task mode ${String(task.mode)}`);
    }
  } catch (err) {
    const e = err as Error;
    process.stderr.write(`${e.stack ?? e.message}\n`);
    write({ ok: false, error: e.message, system: task.system, workload: task.workload });
    process.exit(1);
  }
  // Libraries may leave timers behind after stopping; the result is written.
  process.exit(0);
}

void main();
