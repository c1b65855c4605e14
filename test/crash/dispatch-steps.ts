import { Injectable } from '@nestjs/common';
import { CycloneDatabase, Step, type StepContext } from 'cyclone-nestjs';
import { sleep } from '../support/wait.js';

/**
 * The steps of the broker dispatch fault tests (test/dispatch-faults.e2e-spec.ts),
 * run by worker processes (dispatch-worker.ts). Every call of a handler
 * leaves a row in `df_invocations` (committed before anything else happens,
 * so a handler killed a moment later still shows), and every handler that
 * returns adds one to its run's count in `df_effects`: a test counts what
 * ran where and how often.
 */
export const DF_STEP = 'df_step';
/** Kills its own process at every call: a message that keeps crashing workers. */
export const DF_CRASH = 'df_crash';
/** Throws at every call: a step failing until its attempts run out. */
export const DF_FAIL = 'df_fail';
export const DF_FAIL_ATTEMPTS = 3;

export interface DfInput {
  key: string;
  /** Waits for the test's gate (a row in df_gates with this key) before it returns. */
  gate?: boolean;
  /** Takes this long after its invocation row (and the gate), before its effect. */
  ms?: number;
}

export interface DfOutput {
  pid: number;
  token: number;
}

export const CREATE_DISPATCH_FAULT_TABLES = /* sql */ `
CREATE TABLE IF NOT EXISTS df_invocations (
  id       bigserial PRIMARY KEY,
  run_id   uuid NOT NULL,
  kind     text NOT NULL,
  key      text NOT NULL,
  attempt  int NOT NULL,
  token    bigint NOT NULL,
  pid      int NOT NULL,
  at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS df_effects (
  run_id   uuid PRIMARY KEY,
  n        int NOT NULL,
  last_pid int NOT NULL,
  at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS df_gates (key text PRIMARY KEY);
`;

@Injectable()
export class DispatchFaultSteps {
  constructor(private readonly database: CycloneDatabase) {}

  private async invoked(kind: string, input: DfInput, ctx: StepContext): Promise<void> {
    await this.database.pool.query(
      'INSERT INTO df_invocations (run_id, kind, key, attempt, token, pid) VALUES ($1, $2, $3, $4, $5, $6)',
      [ctx.runId, kind, input.key, ctx.attempt, ctx.fencingToken, process.pid],
    );
  }

  /** Deliberately deaf to ctx.signal: a holder that lost its lease still returns, and the lease must refuse its outcome. */
  @Step(DF_STEP, { maxAttempts: 1 })
  async step(input: DfInput, ctx: StepContext): Promise<DfOutput> {
    await this.invoked(DF_STEP, input, ctx);
    if (input.gate) {
      for (;;) {
        const { rowCount } = await this.database.pool.query('SELECT 1 FROM df_gates WHERE key = $1', [input.key]);
        if (rowCount === 1) break;
        await sleep(20);
      }
    }
    if (input.ms) await sleep(input.ms);
    await this.database.pool.query(
      `INSERT INTO df_effects (run_id, n, last_pid) VALUES ($1, 1, $2)
       ON CONFLICT (run_id) DO UPDATE SET n = df_effects.n + 1, last_pid = EXCLUDED.last_pid, at = clock_timestamp()`,
      [ctx.runId, process.pid],
    );
    return { pid: process.pid, token: ctx.fencingToken };
  }

  @Step(DF_CRASH, { maxAttempts: 1 })
  async crash(input: DfInput, ctx: StepContext): Promise<never> {
    await this.invoked(DF_CRASH, input, ctx);
    process.kill(process.pid, 'SIGKILL');
    return new Promise<never>(() => undefined);
  }

  @Step(DF_FAIL, { maxAttempts: DF_FAIL_ATTEMPTS, backoff: () => 100 })
  async fail(input: DfInput, ctx: StepContext): Promise<never> {
    await this.invoked(DF_FAIL, input, ctx);
    throw new Error(`attempt ${ctx.attempt} fails`);
  }
}
