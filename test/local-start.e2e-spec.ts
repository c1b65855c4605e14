import { describe, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Step, type StepContext } from 'cyclone-nestjs';
import type { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { CycloneDatabase } from '../libs/cyclone/src/database/cyclone-database.js';
import type { Statement } from '../libs/cyclone/src/database/statement.js';
import { HandlerProbe, POLLING_OFF, firstPollTick, ownerOf, testEnvs } from './support/handler-probe.js';
import { sql } from './support/sql.js';
import { waitFor } from './support/wait.js';

/**
 * An enqueue in a client whose worker for the queue is idle starts the job in
 * that worker in the enqueue's own statement: nothing (no wake-up, no claim,
 * no second commit) stands between the enqueue and the handler. It never
 * jumps the queue, and holds to pauses like any claim.
 */
const probe = new HandlerProbe();

@Injectable()
class LocalSteps {
  @Step('held')
  async held(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }
}

const { createEnv, replicaOf } = testEnvs([LocalSteps], probe);

/** The names of the statements the environment sends while `fn` runs. */
async function statementsDuring(env: CycloneTestEnv, fn: () => Promise<void>): Promise<string[]> {
  const spy = jest.spyOn(env.app.get(CycloneDatabase), 'query');
  try {
    await fn();
    return spy.mock.calls.map(([stmt]) => (stmt as Statement).name);
  } finally {
    spy.mockRestore();
  }
}

describe('an enqueue where a worker of the queue is idle', () => {
  it('starts the job in that worker in its own statement: no claim and no wake-up follow', async () => {
    const env = await createEnv({ workers: 2, pollInterval: POLLING_OFF });
    await firstPollTick(env);
    let runId = '';
    const sent = await statementsDuring(env, async () => {
      runId = await env.client.enqueue('held', { n: 1 });
      const call = await probe.call(runId);
      call.release('done');
      await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toBe('done');
    });
    expect(sent).toContain('cyclone_enqueue_and_start');
    expect(sent).not.toContain('cyclone_claim_steps_from');
    expect(sent).not.toContain('cyclone_wake_queues');
  });

  it('starts as many of a batch as the worker has free slots, in order; the rest wait for the claim its wake-up sends', async () => {
    const env = await createEnv({ workers: 2, pollInterval: POLLING_OFF });
    await firstPollTick(env);
    const ids = await env.client.enqueueMany('held', [1, 2, 3, 4, 5].map((n) => ({ n })));
    const started = await Promise.all(ids.slice(0, 2).map((id) => probe.call(id)));
    const steps = await sql<{ state: string; lease_owner: string | null; lease_generation: string }>(
      env,
      'SELECT state, lease_owner, lease_generation FROM cyclone_steps WHERE run_id = ANY ($1) ORDER BY id',
      [ids],
    );
    expect(steps.map((s) => s.state)).toEqual(['running', 'running', 'available', 'available', 'available']);
    expect(steps[0].lease_owner).toBe(ownerOf(env));
    // A job started by its enqueue carries the fencing token its handler was given, as a claimed one does.
    expect(started.map((c) => [c.attempt, c.fencingToken])).toEqual([
      [1, Number(steps[0].lease_generation)],
      [1, Number(steps[1].lease_generation)],
    ]);
    for (const call of started) call.release(call.runId);
    for (const id of ids.slice(2)) (await probe.call(id)).release(id);
    for (const id of ids) await expect(env.client.result(id, { timeout: 10_000 })).resolves.toBe(id);
    expect(probe.calls.map((c) => c.runId)).toEqual(ids);
  });

  it('leaves the job to the claim when an older one waits, so the queue keeps its order', async () => {
    const producer = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF });
    const older = await producer.client.enqueue('held', { n: 'older' });
    // Polling off and the older job's wake-up went to no one: the worker is idle with a job waiting.
    const worker = await replicaOf(producer, { workers: 1, pollInterval: POLLING_OFF });
    const first = await probe.call(older, 0, 30_000);
    first.release('older');
    await expect(worker.client.result(older, { timeout: 10_000 })).resolves.toBe('older');

    const waiting = await producer.client.enqueue('held', { n: 'waiting' });
    const newer = await worker.client.enqueue('held', { n: 'newer' });
    // The newer one was not started ahead of the one that waited: the claim its wake-up sent takes the older first.
    const next = await probe.call(waiting, 0, 30_000);
    expect(probe.calls.map((c) => c.runId)).not.toContain(newer);
    next.release('waiting');
    const last = await probe.call(newer);
    last.release('newer');
    await expect(worker.client.result(newer, { timeout: 10_000 })).resolves.toBe('newer');
  });

  it('starts nothing on a paused queue', async () => {
    const env = await createEnv({ workers: 2, pollInterval: POLLING_OFF });
    await firstPollTick(env);
    expect(await env.client.pauseQueue('default')).toBe(true);
    const runId = await env.client.enqueue('held', { n: 1 });
    const [step] = await sql<{ state: string }>(env, 'SELECT state FROM cyclone_steps WHERE run_id = $1', [runId]);
    expect(step.state).toBe('available');
    expect(await env.client.resumeQueue('default')).toBe(true);
    const call = await probe.call(runId);
    call.release('resumed');
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toBe('resumed');
  });
});

describe('a worker whose slots are all busy', () => {
  it('claims a job it was woken for as soon as a slot frees, not at the next poll tick', async () => {
    const env = await createEnv({ workers: 1, pollInterval: POLLING_OFF });
    await firstPollTick(env);
    const first = await env.client.enqueue('held', { n: 1 });
    const running = await probe.call(first);
    // Its wake-up reaches the worker (in process) before the enqueue returns, while the one slot is busy.
    const second = await env.client.enqueue('held', { n: 2 });
    running.release('first');
    (await probe.call(second)).release('second');
    await expect(env.client.result(second, { timeout: 10_000 })).resolves.toBe('second');
  });
});

describe('a client at startup', () => {
  /** The statements prepared on each of the pool's connections, read from the server. */
  async function preparedPerConnection(env: CycloneTestEnv): Promise<string[][]> {
    const { pool } = env.app.get(CycloneDatabase);
    // Held together, so that each is a different connection.
    const held = await Promise.all(Array.from({ length: pool.totalCount }, () => pool.connect()));
    try {
      return await Promise.all(
        held.map(async (c) => (await c.query<{ name: string }>('SELECT name FROM pg_prepared_statements')).rows.map((r) => r.name)),
      );
    } finally {
      for (const c of held) c.release();
    }
  }

  /**
   * Waits until one look finds `statements` prepared on at least three of the
   * pool's connections. A look misses a connection that a background loop
   * holds at that moment (the pool lends a new one in its place), so it looks
   * again rather than fail on one look.
   */
  function warmedConnections(env: CycloneTestEnv, statements: string[]): Promise<string[][]> {
    return waitFor(
      `three connections with ${statements.join(' and ')} prepared`,
      async () => {
        const warmed = (await preparedPerConnection(env)).filter((names) => statements.every((s) => names.includes(s)));
        return warmed.length >= 3 ? warmed : undefined;
      },
      10_000,
    );
  }

  it("has run its first jobs' enqueue and completion on three pooled connections before any job", async () => {
    const env = await createEnv({ workers: 2, pollInterval: POLLING_OFF });
    await warmedConnections(env, ['cyclone_enqueue_and_start', 'cyclone_complete_steps']);
    // Warming wrote nothing.
    expect(await sql(env, 'SELECT id FROM cyclone_runs')).toEqual([]);
  });

  it('without workers, has run the plain enqueue on them', async () => {
    const env = await createEnv({ runWorkers: false, pollInterval: POLLING_OFF });
    await warmedConnections(env, ['cyclone_enqueue_jobs']);
  });
});
