import { CycloneDatabase, CycloneStats, type StepContext } from 'cyclone-nestjs';
import { CLAIM_STEPS } from '../../libs/cyclone/src/sql/claim.sql.js';
import { afterEach } from '@jest/globals';
import type { Provider } from '@nestjs/common';
import { CycloneTestEnv, type CycloneTestEnvOptions } from 'cyclone-nestjs/testing';
import { waitFor } from './wait.js';

/** One call of a probed handler: what its context said, and what happened to its signal. */
export interface HandlerCall {
  runId: string;
  nodeId: string;
  kind: string;
  attempt: number;
  reclaims: number;
  fencingToken: number;
  deadline: Date | null;
  signal: AbortSignal;
  /** Worker clock, when the handler was entered. */
  startedAt: number;
  /** Worker clock, when its signal aborted. */
  abortedAt?: number;
  /** `signal.reason` once aborted. */
  abortReason?: unknown;
  /** Worker clock, when the handler returned or threw. */
  returnedAt?: number;
  /** Resolves with the signal's reason when it aborts. */
  aborted: Promise<unknown>;
  /** Resolves with the value given to `release`. */
  released: Promise<unknown>;
  /** Lets the handler go on; it returns (or throws) what its kind does with `value`. */
  release(value?: unknown): void;
}

/**
 * Records every call of the handlers that use it and holds each call until the
 * test releases it, so a test can act while a step is running and then decide
 * what the handler returns, and when.
 */
export class HandlerProbe {
  readonly calls: HandlerCall[] = [];

  enter(ctx: StepContext): HandlerCall {
    let release!: (value?: unknown) => void;
    const released = new Promise<unknown>((resolve) => (release = resolve));
    let onAbort!: (reason: unknown) => void;
    const aborted = new Promise<unknown>((resolve) => (onAbort = resolve));
    const call: HandlerCall = {
      runId: ctx.runId,
      nodeId: ctx.nodeId,
      kind: ctx.kind,
      attempt: ctx.attempt,
      reclaims: ctx.reclaims,
      fencingToken: ctx.fencingToken,
      deadline: ctx.deadline,
      signal: ctx.signal,
      startedAt: Date.now(),
      aborted,
      released,
      release,
    };
    const abort = () => {
      call.abortedAt = Date.now();
      call.abortReason = ctx.signal.reason;
      onAbort(ctx.signal.reason);
    };
    if (ctx.signal.aborted) abort();
    else ctx.signal.addEventListener('abort', abort, { once: true });
    this.calls.push(call);
    return call;
  }

  /**
   * A handler body that ignores its signal: it returns whatever it is released
   * with, or throws it when that is an Error.
   */
  async hold(ctx: StepContext): Promise<unknown> {
    const call = this.enter(ctx);
    try {
      const value = await call.released;
      if (value instanceof Error) throw value;
      return value;
    } finally {
      call.returnedAt = Date.now();
    }
  }

  /** A cooperative handler body: it throws its signal's reason as soon as the signal aborts. */
  async cooperate(ctx: StepContext): Promise<unknown> {
    const call = this.enter(ctx);
    try {
      const value = await Promise.race([call.released, call.aborted.then(() => undefined)]);
      if (ctx.signal.aborted) throw ctx.signal.reason;
      return value;
    } finally {
      call.returnedAt = Date.now();
    }
  }

  of(runId: string): HandlerCall[] {
    return this.calls.filter((c) => c.runId === runId);
  }

  /** Waits for the `index`-th call (from 0) of the run's handler. */
  call(runId: string, index = 0, timeoutMs = 10_000): Promise<HandlerCall> {
    return waitFor(`call #${index + 1} of run ${runId}`, async () => this.of(runId)[index], timeoutMs);
  }

  /** Waits until the call has returned (or thrown). */
  returned(call: HandlerCall, timeoutMs = 10_000): Promise<number> {
    return waitFor(`call of run ${call.runId} to return`, async () => call.returnedAt, timeoutMs);
  }

  /** Lets every held call go, so that closing an environment does not wait on them. */
  releaseAll(): void {
    for (const call of this.calls) call.release(undefined);
  }

  reset(): void {
    this.releaseAll();
    this.calls.length = 0;
  }
}

/** The run's only step (a standalone job), as `listSteps` reports it. */
export async function stepOf(env: CycloneTestEnv, runId: string) {
  const steps = await env.client.listSteps(runId);
  if (steps.length !== 1) throw new Error(`Run ${runId} has ${steps.length} steps, expected one`);
  return steps[0];
}

/** Waits until the run's step satisfies `test`, and returns it. */
export function stepWhen(
  env: CycloneTestEnv,
  runId: string,
  test: (step: Awaited<ReturnType<typeof stepOf>>) => boolean,
  what: string,
  timeoutMs = 10_000,
) {
  return waitFor(
    what,
    async () => {
      const step = await stepOf(env, runId);
      return test(step) ? step : undefined;
    },
    timeoutMs,
  );
}

/** Closes environments in reverse order of creation (replicas before the one that owns the database). */
export async function closeAll(envs: CycloneTestEnv[]): Promise<void> {
  const errors: unknown[] = [];
  for (const env of envs.splice(0).reverse()) await env.close().catch((err) => errors.push(err));
  if (errors.length > 0) throw errors[0];
}

/** `promise`'s value, or `fallback` if it has not settled after `ms` (the timer is cleared either way). */
export async function within<T, F>(promise: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<F>((resolve) => (timer = setTimeout(() => resolve(fallback), ms)));
  try {
    return await Promise.race([promise, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polling effectively off: one tick at startup, the next a minute later. */
export const POLLING_OFF: [string, string] = ['60s', '61s'];

/**
 * Claims due steps of `kinds` with the workers' own claim statement, as a
 * worker called `owner` would, and then never heartbeats: the honest picture
 * of a worker that died right after claiming.
 */
export async function claimAsDeadWorker(
  env: CycloneTestEnv,
  kinds: string[],
  opts: { limit?: number; leaseTtlMs?: number; owner?: string; queue?: string } = {},
): Promise<{ id: string; run_id: string; lease_generation: string }[]> {
  const { limit = 1_000, leaseTtlMs = 1, owner = 'dead-worker', queue = 'default' } = opts;
  const { rows } = await env.app.get(CycloneDatabase).query(CLAIM_STEPS, [queue, kinds, limit, owner, leaseTtlMs, [], []]);
  return rows.filter((row): row is typeof row & { id: string } => row.id !== null);
}

/** Waits for the environment's poll loop to finish its first tick (the one at startup). */
/**
 * Waits for the ticks an environment runs at startup: the poll (with
 * workers) and the recovery sweep. With POLLING_OFF the next ones come a
 * minute later.
 */
export async function firstPollTick(env: CycloneTestEnv): Promise<void> {
  const atStartup = env.app.get(CycloneStats).runsWorkers ? ['cyclone:poll', 'cyclone:recovery'] : ['cyclone:recovery'];
  await waitFor(
    `the first ticks of ${atStartup.join(' and ')}`,
    async () => (atStartup.every((loop) => lastTickAt(env, loop) !== null) ? true : undefined),
    10_000,
  );
}

/** When the environment's loop of that name last finished a tick. */
export function lastTickAt(env: CycloneTestEnv, loop: string): Date | null {
  return env.app.get(CycloneStats).loopStates().find((state) => state.name === loop)?.lastTickAt ?? null;
}

/** How the call's attempt ended, in whichever of `envs` ran it (their workers share the runs). */
export function attemptEndOf(envs: CycloneTestEnv[], call: HandlerCall, timeoutMs = 10_000) {
  return waitFor(
    `the end of the attempt of run ${call.runId} node ${call.nodeId} with fencing token ${call.fencingToken}`,
    () =>
      envs
        .flatMap((env) => env.attemptEnds(call.runId))
        .find((end) => end.nodeId === call.nodeId && end.fencingToken === call.fencingToken),
    timeoutMs,
  );
}

/** The client id an environment's workers take leases in. */
export const ownerOf = (env: CycloneTestEnv): string => env.app.get(CycloneStats).clientId;

/**
 * Environments for one test file: `createEnv` starts one with `providers`,
 * `replicaOf` another client on the same database. After each test the
 * probe's held handlers are released and every environment is closed.
 */
export function testEnvs(providers: Provider[], probe: HandlerProbe) {
  const envs: CycloneTestEnv[] = [];
  afterEach(async () => {
    probe.releaseAll();
    await closeAll(envs);
    probe.reset();
  });
  const createEnv = async (options: CycloneTestEnvOptions = {}): Promise<CycloneTestEnv> => {
    const env = await CycloneTestEnv.create({ providers, ...options });
    envs.push(env);
    return env;
  };
  const replicaOf = (env: CycloneTestEnv, options: CycloneTestEnvOptions = {}) =>
    createEnv({ databaseUrl: env.databaseUrl, isolate: false, ...options });
  return { createEnv, replicaOf };
}
