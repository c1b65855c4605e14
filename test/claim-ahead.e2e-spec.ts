import { describe, it, expect, afterEach } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Step, type StepContext } from 'cyclone-nestjs';
import { CycloneTestEnv, TestDatabase } from 'cyclone-nestjs/testing';
import { HandlerProbe, closeAll } from './support/handler-probe.js';
import { sql } from './support/sql.js';
import { testServerUrl } from './support/nest-app-harness.js';
import { waitFor } from './support/wait.js';

/**
 * Claiming ahead: under a backlog of short steps a worker's claim takes more
 * steps than it has free slots, and starts them as slots free. What a user
 * relies on: no more handlers run at once than the queue's workers, a step
 * claimed ahead is not held from other clients for long, and shutdown leaves
 * none of them claimed.
 */
const probe = new HandlerProbe();
let quickNow = 0;
let quickMax = 0;
let quickRuns = 0;

@Injectable()
class AheadSteps {
  @Step('quick')
  async quick() {
    quickNow += 1;
    quickMax = Math.max(quickMax, quickNow);
    quickRuns += 1;
    await new Promise((resolve) => setImmediate(resolve));
    quickNow -= 1;
    return null;
  }

  @Step('held')
  async held(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }
}

let database: TestDatabase | undefined;
const envs: CycloneTestEnv[] = [];

async function client(url: string, options: Parameters<typeof CycloneTestEnv.create>[0] = {}): Promise<CycloneTestEnv> {
  const env = await CycloneTestEnv.create({ providers: [AheadSteps], databaseUrl: url, isolate: false, ...options });
  envs.push(env);
  return env;
}

/** A backlog of quick steps with held ones behind it, enqueued before any worker runs. */
async function backlog(url: string, quick: number, held: number): Promise<string[]> {
  const producer = await client(url, { runWorkers: false });
  await producer.client.enqueueMany('quick', Array.from({ length: quick }, (_, i) => ({ i })));
  return producer.client.enqueueMany('held', Array.from({ length: held }, (_, i) => ({ i })));
}

async function heldSteps(url: string) {
  return sql<{ state: string; n: number; attempt: number; reclaims: number; owned: number }>(
    url,
    `SELECT state, count(*)::int AS n, max(attempt) AS attempt, max(reclaims) AS reclaims,
            count(lease_owner)::int AS owned
       FROM cyclone_steps WHERE kind = 'held' GROUP BY state ORDER BY state`,
  );
}
const runningHeld = async (url: string) =>
  (await heldSteps(url)).find((r) => r.state === 'running')?.n ?? 0;
const heldCalls = (runIds: string[]) => runIds.reduce((n, id) => n + probe.of(id).length, 0);

afterEach(async () => {
  probe.releaseAll();
  await closeAll(envs.splice(0));
  await database?.drop();
  database = undefined;
  probe.reset();
  quickNow = quickMax = quickRuns = 0;
});

describe('claiming ahead', () => {
  it('runs no more handlers than its workers while holding steps claimed ahead, and hands those back untouched at shutdown', async () => {
    database = await TestDatabase.create(testServerUrl());
    const url = database.url;
    const held = await backlog(url, 400, 40);
    const worker = await client(url, { workers: 4, shutdownTimeout: 300 });

    await waitFor('four held handlers', () => heldCalls(held) === 4);
    expect(quickRuns).toBe(400);
    expect(quickMax).toBeLessThanOrEqual(4);
    // More held steps are claimed (running, leased) than handlers run: the
    // rest wait for a slot, and no handler was entered for them.
    expect(await runningHeld(url)).toBeGreaterThan(4);
    expect(heldCalls(held)).toBe(4);

    const started = Date.now();
    envs.splice(envs.indexOf(worker), 1);
    await worker.close();
    expect(Date.now() - started).toBeLessThan(3_000);
    // Every held step is available again, none with an attempt or a reclaim
    // counted, none still leased: another client can take all of them now.
    expect(await heldSteps(url)).toEqual([{ state: 'available', n: 40, attempt: 1, reclaims: 0, owned: 0 }]);
    expect(heldCalls(held)).toBe(4);
  });

  it('hands a step back when it has waited about a second for a slot, so another client runs it, once', async () => {
    database = await TestDatabase.create(testServerUrl());
    const url = database.url;
    const held = await backlog(url, 300, 30);
    await client(url, { workers: 2 });
    await waitFor('two held handlers', () => heldCalls(held) === 2);
    expect(await runningHeld(url)).toBeGreaterThan(2);

    // A second client arrives while the first one's slots stay busy.
    const handedAt = Date.now();
    await client(url, { workers: 30 });
    await waitFor('every held step in a handler', () => heldCalls(held) === 30, 8_000);
    // Handed back after about a second, not after the lease (30 s).
    expect(Date.now() - handedAt).toBeLessThan(5_000);
    // Each ran once, and each was claimed at most twice (ahead by the first
    // client, then by the second): the first client, its slots still busy,
    // did not claim them again after handing them back.
    for (const runId of held) expect(probe.of(runId)).toHaveLength(1);
    const [claims] = await sql<{ most: number }>(url, `SELECT max(lease_generation)::int AS most FROM cyclone_steps WHERE kind = 'held'`);
    expect(claims.most).toBe(2);
    expect(await heldSteps(url)).toEqual([{ state: 'running', n: 30, attempt: 1, reclaims: 0, owned: 30 }]);

    probe.releaseAll();
    await waitFor('every held step completed', async () => {
      const states = await heldSteps(url);
      return states.length === 1 && states[0].state === 'completed';
    });
    for (const runId of held) expect(probe.of(runId)).toHaveLength(1);
  });
});
