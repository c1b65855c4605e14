import { Injectable } from '@nestjs/common';
import { CycloneDatabase, Step, Workflow, defineStep, type StepContext, type WorkflowContext } from 'cyclone-nestjs';

/**
 * The code workflow of the crash tests, run by worker processes
 * (workflow-worker.ts). Every call of its inline functions and of its step's
 * handler leaves a row in `cw_invocations`, so a test counts what ran where;
 * a call told to hang (by its run's mode) tells the test which process holds
 * it (IPC { type: 'hanging', runId, node, pid }) and never returns, the first
 * time only: the test kills that process, and the call made again elsewhere
 * goes on.
 */
export const REMOTE_KIND = 'cw_remote';
const Remote = defineStep<{ mode: CrashMode }, { pid: number }>(REMOTE_KIND);
export const CRASH_FLOW = 'crash-flow';

export type CrashMode =
  /** Inline call 'inline-a' hangs: the workflow's own worker is killed mid inline work. */
  | 'inline'
  /** The step 'remote' hangs on the worker that claimed it, while the workflow awaits it. */
  | 'step'
  /** The step waits for the test's gate (a row in cw_gates), the workflow suspended meanwhile. */
  | 'suspended'
  | 'plain';

export interface CrashFlowInput {
  i: number;
  mode: CrashMode;
}

export const CREATE_WORKFLOW_CRASH_TABLES = /* sql */ `
CREATE TABLE IF NOT EXISTS cw_invocations (
  id            bigserial PRIMARY KEY,
  run_id        uuid NOT NULL,
  node          text NOT NULL,
  pid           int NOT NULL,
  fencing_token bigint NOT NULL,
  at            timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS cw_gates (run_id uuid PRIMARY KEY);
`;

@Injectable()
export class CrashFlowSteps {
  constructor(private readonly database: CycloneDatabase) {}

  /** Records the call; true when it is the first of this node of this run. */
  async invoked(runId: string, node: string, token: number): Promise<boolean> {
    const { rows } = await this.database.pool.query<{ first: boolean }>(
      `WITH earlier AS (SELECT count(*) AS n FROM cw_invocations WHERE run_id = $1 AND node = $2),
            added AS (INSERT INTO cw_invocations (run_id, node, pid, fencing_token) VALUES ($1, $2, $3, $4))
       SELECT n = 0 AS first FROM earlier`,
      [runId, node, process.pid, token],
    );
    return rows[0].first;
  }

  /** Tells the test this process holds the call, and never returns. */
  hang(runId: string, node: string): Promise<never> {
    process.send?.({ type: 'hanging', runId, node, pid: process.pid });
    return new Promise<never>(() => undefined);
  }

  @Step(Remote)
  async remote(input: { mode: CrashMode }, ctx: StepContext): Promise<{ pid: number }> {
    const first = await this.invoked(ctx.runId, ctx.nodeId, ctx.fencingToken);
    if (input.mode === 'step' && first) await this.hang(ctx.runId, ctx.nodeId);
    if (input.mode === 'suspended') {
      for (;;) {
        const { rowCount } = await this.database.pool.query('SELECT 1 FROM cw_gates WHERE run_id = $1', [ctx.runId]);
        if (rowCount === 1) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    return { pid: process.pid };
  }

  @Workflow(CRASH_FLOW)
  async flow(input: CrashFlowInput, wf: WorkflowContext<CrashFlowInput>) {
    const a = await wf.run('inline-a', async ({ fencingToken }) => {
      const first = await this.invoked(wf.runId, 'inline-a', fencingToken);
      if (input.mode === 'inline' && first) await this.hang(wf.runId, 'inline-a');
      return `a${input.i}`;
    });
    const remote = await wf.step('remote', Remote, { mode: input.mode });
    const b = await wf.run('inline-b', async ({ fencingToken }) => {
      await this.invoked(wf.runId, 'inline-b', fencingToken);
      return `b${input.i}`;
    });
    return { a, remotePid: remote.pid, b };
  }
}
