import { afterEach, describe, expect, it } from '@jest/globals';
import {
  CRASH_FLOW,
  CREATE_WORKFLOW_CRASH_TABLES,
  CrashFlowSteps,
  type CrashFlowInput,
  type CrashMode,
} from './crash/workflow-steps.js';
import { CrashRig } from './crash/crash-rig.js';
import { WORKFLOW_WORKER_SCRIPT, type WorkerProcess } from './crash/worker-fleet.js';
import { waitFor } from './support/wait.js';

/**
 * A code workflow's crash rules with real worker processes
 * (test/crash/workflow-worker.ts): SIGKILL a worker while the workflow runs
 * inline work, while it awaits a step that another worker runs, and while it
 * is suspended. Every run completes; a recorded call never runs again, and
 * a call runs again only where a worker died holding it before its result
 * was recorded; nothing is left running or waiting.
 */

/** Long enough that a live worker's renewals (every third of it) land on a loaded machine: only a kill reclaims. */
const LEASE_TTL_MS = 2_000;
const POLL_MS: [number, number] = [50, 200];

let rig: CrashRig | undefined;

afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

/** A call a worker holds and will never finish, as it told the test. */
interface Hanging {
  runId: string;
  node: string;
  pid: number;
}

async function setUp(workers: number) {
  const hanging: Hanging[] = [];
  const started = await CrashRig.create({
    tables: CREATE_WORKFLOW_CRASH_TABLES,
    providers: [CrashFlowSteps],
    fleet: { leaseTtlMs: LEASE_TTL_MS, pollMs: POLL_MS, slots: 3 },
    workers,
    script: WORKFLOW_WORKER_SCRIPT,
    onSpawn: (worker) =>
      worker.child.on('message', (msg: { type?: string } & Hanging) => {
        if (msg?.type === 'hanging') hanging.push({ runId: msg.runId, node: msg.node, pid: msg.pid });
      }),
  });
  rig = started;
  const killed = new Set<number>();
  /** SIGKILLs the process, starts another in its place, and waits for it to be ready. */
  const kill = async (pid: number) => {
    const worker = started.fleet.processes.find((w: WorkerProcess) => w.pid === pid)!;
    killed.add(pid);
    await started.fleet.kill(worker);
    await started.spawn().whenReady;
  };
  return { env: started.env, pool: started.pool, fleet: started.fleet, hanging, killed, kill };
}

type Setup = Awaited<ReturnType<typeof setUp>>;

async function startRuns(s: Setup, mode: CrashMode, from: number, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = from; i < from + count; i++) ids.push(await s.env.client.start(CRASH_FLOW, { i, mode } satisfies CrashFlowInput));
  return ids;
}

interface Invocation {
  node: string;
  pid: number;
}

async function invocations(s: Setup, runId: string): Promise<Invocation[]> {
  return (await s.pool.query<Invocation>('SELECT node, pid FROM cw_invocations WHERE run_id = $1 ORDER BY id', [runId])).rows;
}

/** The workflow's own node: its attempt and reclaims (a crash is not an attempt). */
async function workflowNode(s: Setup, runId: string) {
  const steps = await s.env.client.listSteps(runId);
  return steps.find((step) => step.type === 'workflow')!;
}

/**
 * The run completed; each call ran once, plus once for each worker that was
 * killed holding it before its result was recorded: every invocation but the
 * one whose result stands came from a killed process. Returns the count of
 * each node's invocations.
 */
async function expectCompletedOnce(s: Setup, runId: string, i: number): Promise<Record<string, number>> {
  const output = (await s.env.client.result(runId, { timeout: 30_000 })) as { a: string; b: string; remotePid: number };
  expect(output).toMatchObject({ a: `a${i}`, b: `b${i}` });
  const steps = await s.env.client.listSteps(runId);
  expect(steps.map((step) => [step.nodeId, step.state])).toEqual([
    [CRASH_FLOW, 'completed'],
    ['inline-a', 'completed'],
    ['remote', 'completed'],
    ['inline-b', 'completed'],
  ]);
  const calls = await invocations(s, runId);
  const counts: Record<string, number> = {};
  for (const node of ['inline-a', 'remote', 'inline-b']) {
    const of = calls.filter((c) => c.node === node);
    counts[node] = of.length;
    // The last call's result is the one recorded; any before it died with its process.
    for (const early of of.slice(0, -1)) expect([node, s.killed.has(early.pid)]).toEqual([node, true]);
  }
  expect(calls.filter((c) => c.node === 'remote').at(-1)!.pid).toBe(output.remotePid);
  return counts;
}

describe('a code workflow with real worker processes', () => {
  it(
    'SIGKILLed mid inline work, mid a step it awaits, and while suspended: every run completes, and a call runs again only where a worker died before its result was recorded',
    async () => {
      const s = await setUp(3);

      // 1. Killed while the workflow runs inline work: that call's result was never
      // recorded, so the replay on another worker runs it again, and only it.
      const inline = await startRuns(s, 'inline', 0, 2);
      await waitFor('both inline calls to hang', async () => inline.every((id) => s.hanging.some((h) => h.runId === id)), 20_000);
      for (const pid of new Set(s.hanging.filter((h) => inline.includes(h.runId)).map((h) => h.pid))) await s.kill(pid);
      for (const [k, runId] of inline.entries()) {
        expect(await expectCompletedOnce(s, runId, k)).toEqual({ 'inline-a': 2, remote: 1, 'inline-b': 1 });
        // The workflow's own attempt was reclaimed, not consumed.
        expect(await workflowNode(s, runId)).toMatchObject({ attempt: 1, reclaims: 1 });
      }

      // 2. Killed while the step the workflow awaits runs on another worker: the
      // step is reclaimed and runs again; the workflow's recorded calls do not.
      const step = await startRuns(s, 'step', 2, 2);
      await waitFor('both steps to hang', async () => step.every((id) => s.hanging.some((h) => h.runId === id)), 20_000);
      for (const pid of new Set(s.hanging.filter((h) => step.includes(h.runId)).map((h) => h.pid))) await s.kill(pid);
      for (const [k, runId] of step.entries()) {
        const counts = await expectCompletedOnce(s, runId, k + 2);
        expect(counts.remote).toBe(2);
      }

      // 3. Killed while the workflow is suspended: it holds no lease, so nothing of it
      // is reclaimed; the step's finish wakes it on a live worker.
      const suspended = await startRuns(s, 'suspended', 4, 2);
      for (const runId of suspended) {
        await waitFor(
          `run ${runId} to be suspended on its step`,
          async () => {
            const steps = await s.env.client.listSteps(runId);
            const node = steps.find((x) => x.type === 'workflow');
            return node?.state === 'pending' && node.leaseOwner === null && steps.some((x) => x.nodeId === 'remote' && x.state === 'running');
          },
          20_000,
        );
      }
      const passPids = new Set<number>();
      for (const runId of suspended) passPids.add((await invocations(s, runId)).find((c) => c.node === 'inline-a')!.pid);
      for (const pid of passPids) if (s.fleet.live().some((w) => w.pid === pid)) await s.kill(pid);
      for (const runId of suspended) await s.pool.query('INSERT INTO cw_gates (run_id) VALUES ($1)', [runId]);
      for (const [k, runId] of suspended.entries()) {
        expect((await expectCompletedOnce(s, runId, k + 4))['inline-a']).toBe(1);
        expect(await workflowNode(s, runId)).toMatchObject({ attempt: 1, reclaims: 0 });
      }

      // Nothing of any run is left running, waiting or leased.
      const { rows } = await s.pool.query(
        `SELECT count(*)::int AS n FROM cyclone_steps WHERE state NOT IN ('completed', 'discarded', 'cancelled') OR lease_expiry IS NOT NULL`,
      );
      expect(rows[0].n).toBe(0);
    },
    180_000,
  );
});
