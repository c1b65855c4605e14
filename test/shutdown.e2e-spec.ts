import { describe, it, expect, afterEach } from '@jest/globals';
import { createHook } from 'node:async_hooks';
import { Injectable } from '@nestjs/common';
import { Step, StepAbortedError, type StepContext } from 'cyclone-nestjs';
import { CycloneTestEnv, TestDatabase } from 'cyclone-nestjs/testing';
import { HandlerProbe, POLLING_OFF, closeAll, firstPollTick, within, type HandlerCall } from './support/handler-probe.js';
import { sql } from './support/sql.js';
import { CapturingLogger, testServerUrl } from './support/nest-app-harness.js';
import { waitFor } from './support/wait.js';
import { untilDatabaseTime } from './support/e2e-helpers.js';

const probe = new HandlerProbe();

@Injectable()
class ShutdownSteps {
  /** Ignores its signal: returns whatever the test releases it with. */
  @Step('held')
  async held(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }

  @Step('cooperative', { timeout: '1m' })
  async cooperative(_input: unknown, ctx: StepContext) {
    return probe.cooperate(ctx);
  }
}

/** The database outlives the clients under test, so that what they leave behind can be read after they close. */
let database: TestDatabase | undefined;
const envs: CycloneTestEnv[] = [];

async function freshDatabase(): Promise<string> {
  database = await TestDatabase.create(testServerUrl());
  return database.url;
}
async function client(url: string, options: Parameters<typeof CycloneTestEnv.create>[0] = {}): Promise<CycloneTestEnv> {
  const env = await CycloneTestEnv.create({ providers: [ShutdownSteps], databaseUrl: url, isolate: false, ...options });
  envs.push(env);
  return env;
}
/** Closes one client now (it is not closed again afterwards); returns how long that took. */
async function closeNow(env: CycloneTestEnv): Promise<number> {
  envs.splice(envs.indexOf(env), 1);
  const started = Date.now();
  await env.close();
  return Date.now() - started;
}

afterEach(async () => {
  probe.releaseAll();
  await closeAll(envs);
  await database?.drop();
  database = undefined;
  probe.reset();
});

interface StepRow {
  state: string;
  attempt: number;
  reclaims: number;
  lease_owner: string | null;
  error: string | null;
  error_kind: string | null;
  output: unknown;
  claimable: boolean;
}
async function stepRow(url: string, runId: string): Promise<StepRow> {
  const [row] = await sql<StepRow>(
    url,
    `SELECT state, attempt, reclaims, lease_owner, error, error_kind, output, scheduled_at <= now() AS claimable
       FROM cyclone_steps WHERE run_id = $1`,
    [runId],
  );
  return row;
}

function expectShutdownReason(reason: unknown): void {
  expect(reason).toBeInstanceOf(StepAbortedError);
  expect((reason as StepAbortedError).reason).toBe('shutdown');
}

const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

/**
 * Records every timer created from now on with where it was created, to tell
 * the library's timers (Cyclone, its pool, Nest) from the test's and jest's own.
 */
function trackTimers() {
  const timers: { timer: NodeJS.Timeout & { _destroyed?: boolean }; stack: string }[] = [];
  const hook = createHook({
    init(_id, type, _trigger, resource) {
      if (type === 'Timeout') timers.push({ timer: resource as NodeJS.Timeout, stack: new Error().stack ?? '' });
    },
  });
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 40;
  hook.enable();
  const fromLibrary = (stack: string) =>
    stack.split('\n').some((frame) => /\/libs\/cyclone\/|\/node_modules\/(pg|pg-pool|typeorm|@nestjs)\//.test(frame));
  return {
    stop: () => {
      hook.disable();
      Error.stackTraceLimit = stackTraceLimit;
    },
    /** Library timers still pending (neither fired nor cleared) that keep the process alive. */
    pending: () =>
      timers
        .filter(({ timer, stack }) => !timer._destroyed && timer.hasRef() && fromLibrary(stack))
        .map(({ stack }) =>
          stack
            .split('\n')
            .slice(1)
            .filter((frame) => !frame.includes('node:') && !frame.includes('AsyncHook.init'))
            .slice(0, 4)
            .join('\n'),
        ),
  };
}

describe('graceful shutdown', () => {
  it('a handler that finishes within shutdownTimeout completes its step, its lease renewed all along; nothing new is claimed meanwhile', async () => {
    const url = await freshDatabase();
    // A replica whose sweep (every 50-200 ms) would reclaim the step if its lease lapsed during the drain.
    const replica = await client(url, { runWorkers: false });
    // The drain below outlasts the lease several times over, so only renewals keep the step this client's.
    const logger = new CapturingLogger();
    const closing = await client(url, { leaseTtl: 600, shutdownTimeout: 6_000, workers: 2, logger });
    const runId = await closing.client.enqueue('held', {});
    const call = await probe.call(runId);

    let closedAt: number | undefined;
    const closed = closeNow(closing).then(() => (closedAt = Date.now()));
    // The workers have stopped claiming and the drain waits for the handler.
    await waitFor('the drain to begin', () => logger.messages.some((m) => m.startsWith('Waiting up to 6000 ms for 1 running step')));
    // Enqueued while the client drains: it has a free worker, but it must not claim any more.
    const late = await replica.client.enqueue('held', { late: true });
    // The drain outlasts the lease the step held when it began, twice over, and the replica's sweep looks after that.
    const [{ lease_expiry }] = await sql<{ lease_expiry: Date }>(url, 'SELECT lease_expiry FROM cyclone_steps WHERE run_id = $1', [runId]);
    await untilDatabaseTime(replica, new Date(lease_expiry.getTime() + 600));
    await replica.waitForPasses('cyclone:recovery', 2);
    const releasedAt = Date.now();
    call.release({ finished: 'during shutdown' });
    await closed;
    // It waited for the handler, and no longer than that (not its shutdownTimeout of 6 s).
    expect(closedAt).toBeGreaterThanOrEqual(releasedAt);
    expect(closedAt! - releasedAt).toBeLessThan(3_000);

    expect(call.abortedAt).toBeUndefined();
    expect(await stepRow(url, runId)).toMatchObject({ state: 'completed', output: { finished: 'during shutdown' }, reclaims: 0, attempt: 1 });
    expect(probe.of(late)).toHaveLength(0);
    expect(await stepRow(url, late)).toMatchObject({ state: 'available', attempt: 1 });
  });

  it('handlers still running after shutdownTimeout are aborted with reason shutdown and their steps handed back untouched; another client runs them', async () => {
    const url = await freshDatabase();
    const closing = await client(url, { shutdownTimeout: 300, workers: 2 });
    const cooperative = await closing.client.enqueue('cooperative', {});
    const stubborn = await closing.client.enqueue('held', {});
    const [coopCall, stubbornCall] = [await probe.call(cooperative), await probe.call(stubborn)];

    const took = await closeNow(closing);
    expect(took).toBeGreaterThanOrEqual(250);
    // It did not wait for the handler that ignores its signal (which never returns).
    expect(took).toBeLessThan(5_000);
    expectShutdownReason(await within(coopCall.aborted, 1_000, 'no abort'));
    expectShutdownReason(await within(stubbornCall.aborted, 1_000, 'no abort'));
    expect(stubbornCall.returnedAt).toBeUndefined();

    // Available at once, with neither an attempt nor a reclaim counted, and no error.
    for (const runId of [cooperative, stubborn]) {
      expect(await stepRow(url, runId)).toEqual({
        state: 'available',
        attempt: 1,
        reclaims: 0,
        lease_owner: null,
        error: null,
        error_kind: null,
        output: null,
        claimable: true,
      });
    }

    const next = await client(url);
    const [coopAgain, stubbornAgain] = [await probe.call(cooperative, 1), await probe.call(stubborn, 1)];
    expect(coopAgain).toMatchObject({ attempt: 1, reclaims: 0 });
    expect(stubbornAgain).toMatchObject({ attempt: 1, reclaims: 0 });
    // The first client's stubborn handler returns at last: nothing of it lands.
    stubbornCall.release('from the closed client');
    coopAgain.release('cooperative done');
    stubbornAgain.release('stubborn done');
    await expect(next.client.result(cooperative, { timeout: 10_000 })).resolves.toBe('cooperative done');
    await expect(next.client.result(stubborn, { timeout: 10_000 })).resolves.toBe('stubborn done');
  });

  it('a client that is already running picks up handed-back steps at once, without waiting for its poll', async () => {
    const url = await freshDatabase();
    const closing = await client(url, { shutdownTimeout: 200, workers: 1 });
    const runId = await closing.client.enqueue('held', {});
    await probe.call(runId);
    // Started only now, so it did not claim the step first; it polls once a minute.
    const other = await client(url, { pollInterval: POLLING_OFF });
    await firstPollTick(other);

    await closeNow(closing);
    const again = await probe.call(runId, 1, 4_000);
    expect(again).toMatchObject({ attempt: 1, reclaims: 0 });
    again.release('picked up');
    await expect(other.client.result(runId, { timeout: 10_000 })).resolves.toBe('picked up');
  });

  it('after close no Cyclone timer keeps the process alive and no connection of the app remains', async () => {
    const url = await freshDatabase();
    const connections = () =>
      sql<{ application_name: string }>(
        url,
        `SELECT application_name FROM pg_stat_activity
          WHERE datname = current_database() AND application_name IN ('cyclone', 'cyclone-listener')`,
      );
    const before = timeouts();
    const timers = trackTimers();
    let call: HandlerCall | undefined;
    try {
      const env = await client(url, { leaseTtl: 300, shutdownTimeout: 300 });
      const runId = await env.client.enqueue('cooperative', {});
      call = await probe.call(runId);
      // While it runs: its loops, the step's heartbeat and deadline timers, the pool and LISTEN connections.
      expect(timeouts()).toBeGreaterThanOrEqual(before + 3);
      expect(timers.pending().length).toBeGreaterThanOrEqual(3);
      expect((await connections()).map((c) => c.application_name)).toEqual(
        expect.arrayContaining(['cyclone', 'cyclone-listener']),
      );

      await closeNow(env);
      // A timer cleared on its way out is destroyed a moment later.
      await waitFor('the library\'s timers to be gone', () => timers.pending().length === 0, 2_000);
    } finally {
      timers.stop();
    }
    expectShutdownReason(call?.abortReason);
    expect(timers.pending()).toEqual([]);
    // The process as a whole: back to what it had before, give or take one of jest's own.
    expect(timeouts()).toBeLessThanOrEqual(before + 1);
    await waitFor('the closed app\'s connections to go', async () => (await connections()).length === 0, 2_000);
  });
});
