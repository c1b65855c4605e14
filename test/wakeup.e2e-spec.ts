import { describe, it, expect, afterEach } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Step } from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { NotificationListener } from '../libs/cyclone/src/notifications/notification-listener.js';
import { WAKE_CHANNEL } from 'cyclone-nestjs';
import { lastTickAt } from './support/handler-probe.js';
import { sql } from './support/sql.js';
import { waitFor } from './support/wait.js';

/** Polling effectively off: one tick at startup, the next a minute later. */
const POLLING_OFF = ['60s', '61s'] as [string, string];
/** Generous: on a busy 2-core machine a NOTIFY wake-up takes milliseconds, polling here takes a minute. */
const QUICK_MS = 5_000;

const KILL_LISTENER = `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
  WHERE application_name = 'cyclone-listener' AND datname = current_database()`;
const LISTENER_PIDS = `SELECT pid FROM pg_stat_activity
  WHERE application_name = 'cyclone-listener' AND datname = current_database()`;

@Injectable()
class PingSteps {
  @Step('ping')
  async ping(input: { n: number }) {
    return { pong: input.n };
  }
}

let env: CycloneTestEnv | undefined;
let replica: CycloneTestEnv | undefined;
afterEach(async () => {
  await replica?.close();
  await env?.close();
  env = replica = undefined;
});

async function listenerPids(e: CycloneTestEnv): Promise<number[]> {
  return (await e.dataSource.query(LISTENER_PIDS)).map((r: { pid: number }) => r.pid);
}

/** Enqueues a job and waits for its result; returns how long that took. */
async function timeJob(e: CycloneTestEnv, n: number, timeoutMs = QUICK_MS): Promise<number> {
  const started = Date.now();
  const runId = await e.client.enqueue('ping', { n });
  await expect(e.client.result(runId, { timeout: timeoutMs })).resolves.toEqual({ pong: n });
  return Date.now() - started;
}

/** The poll loop's first tick (at startup) is done; returns when it ended. */
async function firstPollTick(e: CycloneTestEnv): Promise<number> {
  const at = await waitFor('the first poll tick', () => lastTickAt(e, 'cyclone:poll') ?? undefined, 5_000, 20);
  return at.getTime();
}

describe('wake-ups', () => {
  it('LISTEN/NOTIFY wakes the workers: with polling off, jobs enqueued one after another each run at once', async () => {
    env = await CycloneTestEnv.create({ providers: [PingSteps], pollInterval: POLLING_OFF });
    const pollTick = await firstPollTick(env);

    for (const n of [1, 2, 3]) expect(await timeJob(env, n)).toBeLessThan(QUICK_MS);
    // No poll tick happened meanwhile: the wake-ups came over LISTEN.
    expect(lastTickAt(env, 'cyclone:poll')!.getTime()).toBe(pollTick);
  });

  it('after the LISTEN connection is killed, jobs still complete (polling covers the gap) and the listener reconnects', async () => {
    env = await CycloneTestEnv.create({ providers: [PingSteps], pollInterval: [50, 150] });
    await firstPollTick(env);
    const [before] = await listenerPids(env);
    expect(before).toEqual(expect.any(Number));

    const killed = await env.dataSource.query(KILL_LISTENER);
    expect(killed).toEqual([{ killed: true }]);
    // Jobs enqueued right away, due now and due shortly (a due-later job gets no NOTIFY at all).
    const now = await Promise.all([1, 2, 3].map((n) => env!.client.enqueue('ping', { n })));
    const later = await env.client.enqueue('ping', { n: 4 }, { processIn: '500ms' });
    const outputs = await Promise.all([...now, later].map((id) => env!.client.result(id, { timeout: 10_000 })));
    expect(outputs).toEqual([{ pong: 1 }, { pong: 2 }, { pong: 3 }, { pong: 4 }]);

    // A new LISTEN connection replaced the killed one.
    const after = await waitFor(
      'the listener to reconnect',
      async () => {
        const pids = await listenerPids(env!);
        return pids.length === 1 && pids[0] !== before && env!.app.get(NotificationListener).isConnected ? pids : undefined;
      },
      10_000,
    );
    expect(after).not.toContain(before);
  });

  it('with polling off, the listener reconnects after being killed and wakes the workers again', async () => {
    env = await CycloneTestEnv.create({ providers: [PingSteps], pollInterval: POLLING_OFF });
    const pollTick = await firstPollTick(env);
    const [before] = await listenerPids(env);
    expect(await timeJob(env, 1)).toBeLessThan(QUICK_MS);

    await env.dataSource.query(KILL_LISTENER);
    // Enqueued while the listener is down or coming back: the reconnect makes the workers look again.
    const inGap = await env.client.enqueue('ping', { n: 2 });

    await waitFor(
      'the listener to reconnect',
      async () => {
        const pids = await listenerPids(env!);
        return pids.length === 1 && pids[0] !== before && env!.app.get(NotificationListener).isConnected;
      },
      10_000,
    );
    await expect(env.client.result(inGap, { timeout: QUICK_MS })).resolves.toEqual({ pong: 2 });

    // Later jobs are woken over the new connection, quickly, one after another.
    for (const n of [3, 4]) {
      expect(await timeJob(env, n)).toBeLessThan(QUICK_MS);
    }
    expect(lastTickAt(env, 'cyclone:poll')!.getTime()).toBe(pollTick);
  });

  describe("an app's own wake-ups", () => {
    /**
     * Two apps on one database, polling off; records each wake-up each app's
     * listener hands to its workers. The first has no slots free (none at
     * all), so its enqueues are not started in its own workers and wake the
     * queue instead; the replica runs them.
     */
    async function twoApps() {
      env = await CycloneTestEnv.create({ providers: [PingSteps], pollInterval: POLLING_OFF, workers: 0 });
      replica = await CycloneTestEnv.create({
        providers: [PingSteps],
        pollInterval: POLLING_OFF,
        databaseUrl: env.databaseUrl,
        isolate: false,
      });
      const heard = { own: [] as string[], replica: [] as string[] };
      env.app.get(NotificationListener).on(WAKE_CHANNEL, (queue) => heard.own.push(queue));
      replica.app.get(NotificationListener).on(WAKE_CHANNEL, (queue) => heard.replica.push(queue));
      return { app: env, heard };
    }

    it('wake its workers once, in process, and every other replica once', async () => {
      const { app, heard } = await twoApps();
      expect(await timeJob(app, 1)).toBeLessThan(QUICK_MS);
      // A NOTIFY sent after the job's reaches the listener after the job's echo would have: once it is heard, the echo was skipped.
      await sql(app, `SELECT pg_notify('${WAKE_CHANNEL}', 'marker')`);
      await waitFor('the marker', () => heard.own.includes('marker') && heard.replica.includes('marker'), QUICK_MS);
      expect(heard).toEqual({ own: ['default', 'marker'], replica: ['default', 'marker'] });
    });

    it('still reach every other replica while the LISTEN connection is down', async () => {
      const { app, heard } = await twoApps();
      await app.app.get(NotificationListener).stop();
      expect(await timeJob(app, 1)).toBeLessThan(QUICK_MS);
      await waitFor('the replica to hear the wake-up', () => (heard.replica.length > 0 ? true : undefined), QUICK_MS);
      expect(heard).toEqual({ own: ['default'], replica: ['default'] });
    });
  });
});
