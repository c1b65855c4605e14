import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { DuplicateError, InvalidOptionError, Step, defineWorkflow, type StepContext } from 'cyclone-nestjs';
import { HandlerProbe, testEnvs } from './support/handler-probe.js';
import { countRows, expectCycloneError, expectRejectedWritingNothing } from './support/e2e-helpers.js';
import { sql } from './support/sql.js';
import { sleep, waitFor } from './support/wait.js';

/**
 * Unique keys that keep, replace or debounce (SPEC §13), with three replicas
 * enqueueing against one database.
 */

const probe = new HandlerProbe();

@Injectable()
class UniqueSteps {
  @Step('sync', { concurrency: { limit: 5, key: (input: { account: string }) => input.account } })
  async sync(input: { account: string; n: number }, ctx: StepContext): Promise<unknown> {
    if (input.n < 0) return probe.cooperate(ctx);
    return input;
  }

  @Step('other_kind')
  async other(): Promise<null> {
    return null;
  }
}

const Flow = defineWorkflow('unique_flow').step('only', 'other_kind');
const { createEnv, replicaOf } = testEnvs([UniqueSteps], probe);

/** Three clients on one database; with `workers: 0` no step ever starts. */
async function threeReplicas(workers: number) {
  const options = { workers, workflows: [Flow], pollInterval: [50, 100] as [number, number] };
  const first = await createEnv(options);
  return [first, await replicaOf(first, options), await replicaOf(first, options)];
}

async function stepRow(env: Awaited<ReturnType<typeof createEnv>>, runId: string) {
  const [row] = await sql(
    env,
    `SELECT r.input, s.flow_key, s.state, extract(epoch FROM s.scheduled_at - now()) * 1000 AS due_in_ms
       FROM cyclone_runs r JOIN cyclone_steps s ON s.run_id = r.id WHERE r.id = $1`,
    [runId],
  );
  return row;
}

describe('unique keys across three replicas', () => {
  it("'error' (the default, also as a bare string) throws DuplicateError naming the holder", async () => {
    const [a, b] = await threeReplicas(0);
    const holder = await a.client.enqueue('sync', { account: 'x', n: 1 }, { unique: 'sync:x' });
    const err = await expectCycloneError(b.client.enqueue('sync', { account: 'x', n: 2 }, { unique: { key: 'sync:x' } }), DuplicateError, 'duplicate');
    expect(err.runId).toBe(holder);
    expect(await countRows(a)).toEqual({ runs: 1, steps: 1 });
  });

  it("'keep': every replica enqueueing the same key at once gets the one holder's run id", async () => {
    const envs = await threeReplicas(0);
    const ids = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        envs[i % 3].client.enqueue('sync', { account: 'k', n: i }, { unique: { key: 'sync:k', onConflict: 'keep' } }),
      ),
    );
    expect(new Set(ids).size).toBe(1);
    expect(await countRows(envs[0])).toEqual({ runs: 1, steps: 1 });
    // Kept as the enqueue that won left it.
    const { input } = await stepRow(envs[0], ids[0]);
    expect(input.account).toBe('k');
  });

  it("'replace' gives a holder that has not started the new input and the keys computed from it", async () => {
    const [a, b, c] = await threeReplicas(0);
    const unique = { key: 'sync:r', onConflict: 'replace' as const };
    const holder = await a.client.enqueue('sync', { account: 'first', n: 1 }, { unique });
    expect(await b.client.enqueue('sync', { account: 'second', n: 2 }, { unique })).toBe(holder);
    expect(await c.client.enqueue('sync', { account: 'third', n: 3 }, { unique })).toBe(holder);
    const row = await stepRow(a, holder);
    expect(row.input).toEqual({ account: 'third', n: 3 });
    expect(row.flow_key).toBe('third');
    expect(await countRows(a)).toEqual({ runs: 1, steps: 1 });
  });

  it("'replace' of a holder that has started throws DuplicateError and changes nothing", async () => {
    const [a, b] = await threeReplicas(2);
    const unique = { key: 'sync:started', onConflict: 'replace' as const };
    const holder = await a.client.enqueue('sync', { account: 'x', n: -1 }, { unique });
    await probe.call(holder);
    const err = await expectCycloneError(b.client.enqueue('sync', { account: 'y', n: 5 }, { unique }), DuplicateError, 'duplicate');
    expect(err.runId).toBe(holder);
    expect(err.message).toMatch(/has already started/);
    expect((await stepRow(a, holder)).input).toEqual({ account: 'x', n: -1 });
    // 'keep' of a started holder still answers with it.
    expect(await b.client.enqueue('sync', { account: 'y', n: 5 }, { unique: { key: 'sync:started', onConflict: 'keep' } })).toBe(holder);
    probe.releaseAll();
  });

  it('debounce: the run starts a debounce after the last enqueue, each enqueue pushing it back, once', async () => {
    const envs = await threeReplicas(2);
    const unique = { key: 'sync:d', debounce: 600, onConflict: 'replace' as const };
    const t0 = Date.now();
    const holder = await envs[0].client.enqueue('sync', { account: 'd', n: 0 }, { unique });
    expect(Number((await stepRow(envs[0], holder)).due_in_ms)).toBeGreaterThan(400);
    let last = t0;
    for (let i = 1; i <= 4; i++) {
      await sleep(250);
      last = Date.now();
      expect(await envs[i % 3].client.enqueue('sync', { account: 'd', n: i }, { unique })).toBe(holder);
      expect((await stepRow(envs[0], holder)).state).toBe('available');
    }
    const run = await envs[0].runUntilComplete(holder, { timeout: 10_000 });
    expect(run.state).toBe('completed');
    expect(await envs[0].client.result(holder)).toEqual({ account: 'd', n: 4 });
    const [{ started }] = await sql(envs[0], 'SELECT started_at AS started FROM cyclone_steps WHERE run_id = $1', [holder]);
    // Pushed back past the last enqueue (clocks of one machine), and well past the first one's debounce.
    expect((started as Date).getTime()).toBeGreaterThanOrEqual(last + 500);
    expect(await countRows(envs[0])).toEqual({ runs: 1, steps: 1 });
    // Debounce alone keeps the holder's input.
    const kept = await envs[1].client.enqueue('sync', { account: 'e', n: 1 }, { unique: { key: 'sync:e', debounce: '2s' } });
    expect(await envs[2].client.enqueue('sync', { account: 'e', n: 2 }, { unique: { key: 'sync:e', debounce: '2s' } })).toBe(kept);
    expect((await stepRow(envs[0], kept)).input).toEqual({ account: 'e', n: 1 });
  });

  it("enqueueTx with 'replace' acts on the holder without aborting the caller's transaction", async () => {
    const [a, b] = await threeReplicas(0);
    const holder = await a.client.enqueue('sync', { account: 't', n: 1 }, { unique: 'sync:t' });
    const inTx = await b.dataSource.transaction(async (manager) => {
      const id = await b.client.enqueueTx(manager, 'sync', { account: 't', n: 2 }, { unique: { key: 'sync:t', onConflict: 'replace' } });
      // The transaction is still usable.
      await manager.query('SELECT 1');
      return id;
    });
    expect(inTx).toBe(holder);
    expect((await stepRow(a, holder)).input).toEqual({ account: 't', n: 2 });
  });

  it("workflows take 'keep'; 'replace' and debounce are refused; bad unique options write nothing", async () => {
    const [a, b] = await threeReplicas(0);
    const run = await a.client.start(Flow, {}, { unique: 'flow:1' });
    expect(await b.client.start(Flow, {}, { unique: { key: 'flow:1', onConflict: 'keep' } })).toBe(run);
    await expectCycloneError(b.client.start(Flow, {}, { unique: { key: 'flow:1', onConflict: 'replace' } as never }), InvalidOptionError, 'invalid_option');
    await sql(a, 'DELETE FROM cyclone_steps; DELETE FROM cyclone_runs; DELETE FROM cyclone_unique_keys');

    const bad: [unknown, RegExp][] = [
      [{ key: 'k', onConflict: 'upsert' }, /unique\.onConflict" must be 'error', 'keep' or 'replace'/],
      [{ key: 'k', debounce: '1s', onConflict: 'error' }, /cannot go with onConflict 'error'/],
      [{ key: 'k', debounce: -5 }, /unique\.debounce/],
      [{ key: '' }, /unique\.key/],
      [{ key: 'k', ttl: 5 }, /Unknown option "ttl"/],
      [42, /Option "unique" must be a string key or \{ key, onConflict, debounce \}; got 42/],
    ];
    for (const [unique, message] of bad) {
      const err = await expectRejectedWritingNothing(
        a,
        () => a.client.enqueue('sync', { account: 'z', n: 1 }, { unique: unique as never }),
        InvalidOptionError,
        'invalid_option',
      );
      expect(err.message).toMatch(message);
    }
  });
});

describe('a debounced holder under a limit', () => {
  it('is claimed once it is due, not before', async () => {
    const [a] = await threeReplicas(2);
    const id = await a.client.enqueue('sync', { account: 'late', n: 1 }, { unique: { key: 'late', debounce: 1_500 } });
    // The workers have looked, and it is still before it is due.
    await a.waitForPasses('cyclone:claim', 2);
    expect(Number((await stepRow(a, id)).due_in_ms)).toBeGreaterThan(0);
    expect((await stepRow(a, id)).state).toBe('available');
    await waitFor('the debounced run', async () => (await a.client.getRun(id)).state === 'completed', 5_000);
  });
});
