import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { CycloneStats, PermanentError, RunNotFoundError, Step } from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { deferred, expectCycloneError, rowsOfRun } from './support/e2e-helpers.js';
import { sql } from './support/sql.js';
import { waitFor } from './support/wait.js';

/**
 * `retention: 0` keeps no history: a completed standalone job is deleted,
 * with its run, its attempts and its unique key, in the statement that
 * completes it, not by the retention sweep. A failed one is kept for the
 * default retention, so an operator sees it; a caller waiting for the result
 * when it completed still gets it; one that asks afterwards is told why the
 * run is not there.
 */
const gates = new Map<string, Promise<void>>();

@Injectable()
class NoHistorySteps {
  @Step('no-history', { retention: 0 })
  async noHistory(input: { n: number; gate?: string }) {
    if (input.gate) await gates.get(input.gate);
    return { doubled: input.n * 2 };
  }

  @Step('no-history-failing', { retention: 0, maxAttempts: 2, backoff: () => 1 })
  async failing(input: { permanent: boolean }) {
    if (input.permanent) throw new PermanentError('refused for good');
    throw new Error('fails every time');
  }

  @Step('kept')
  async kept(input: { n: number }) {
    return input.n;
  }
}

let env: CycloneTestEnv;
/** Runs whose step the engine told its observers had finished, and whether their rows were gone right then. */
const goneAtFinish = new Map<string, boolean>();

beforeAll(async () => {
  env = await CycloneTestEnv.create({ providers: [NoHistorySteps] });
  env.app.get(CycloneStats).events.observe({
    stepFinished: (e) => {
      if (e.outcome !== 'completed') return;
      // The completion has committed when its observers hear of it; the retention sweep runs once a minute.
      void rowsOfRun(env, e.runId).then((rows) => goneAtFinish.set(e.runId, rows.runs === 0 && rows.steps === 0));
    },
  });
});
afterAll(async () => {
  await env?.close();
});

const attemptsOf = async (runId: string) =>
  (await sql<{ n: number }>(env, 'SELECT count(*)::int AS n FROM cyclone_attempts WHERE run_id = $1', [runId]))[0].n;

describe('retention: 0', () => {
  it('deletes a completed job with its run in the statement that completes it', async () => {
    const ids = await env.client.enqueueMany('no-history', [{ n: 1 }, { n: 2 }, { n: 3 }]);
    const single = await env.client.enqueue('kept', { n: 4 }, { retention: 0 });
    const kept = await env.client.enqueue('kept', { n: 5 });
    await waitFor('every completion observed', () => [...ids, single, kept].every((id) => goneAtFinish.has(id)));
    for (const id of [...ids, single]) {
      expect(goneAtFinish.get(id)).toBe(true);
      expect(await rowsOfRun(env, id)).toEqual({ runs: 0, steps: 0 });
      expect(await attemptsOf(id)).toBe(0);
    }
    // Without it, a run is kept as before.
    expect(goneAtFinish.get(kept)).toBe(false);
    expect((await env.client.getRun(kept)).state).toBe('completed');
  });

  it('frees a unique key as it deletes the run', async () => {
    const first = await env.client.enqueue('no-history', { n: 1 }, { unique: 'once-at-a-time' });
    await waitFor('the first run deleted', async () => (await rowsOfRun(env, first)).runs === 0);
    const second = await env.client.enqueue('no-history', { n: 2 }, { unique: 'once-at-a-time' });
    expect(second).not.toBe(first);
    await waitFor('the second run deleted', async () => (await rowsOfRun(env, second)).runs === 0);
    const [{ n }] = await sql<{ n: number }>(env, `SELECT count(*)::int AS n FROM cyclone_unique_keys WHERE unique_key = 'once-at-a-time'`);
    expect(n).toBe(0);
  });

  it('gives the output to a caller waiting when the job completed, and tells one asking afterwards why the run is gone', async () => {
    const gate = deferred();
    gates.set('waited', gate.promise);
    const waited = await env.client.enqueue('no-history', { n: 21, gate: 'waited' });
    const result = env.client.result(waited, { timeout: 20_000 });
    // The caller is waiting (its run is marked watched) before the job completes.
    await waitFor('the caller to wait', async () => {
      const rows = await sql<{ watched: boolean }>(env, 'SELECT notify_finish AS watched FROM cyclone_runs WHERE id = $1', [waited]);
      return rows[0]?.watched === true;
    });
    gate.resolve();
    await expect(result).resolves.toEqual({ doubled: 42 });
    // Kept for a minute for its caller, then swept.
    const [kept] = await sql<{ seconds: number }>(
      env,
      'SELECT extract(epoch FROM delete_after - finished_at)::int AS seconds FROM cyclone_runs WHERE id = $1',
      [waited],
    );
    expect(kept.seconds).toBe(60);

    const unwatched = await env.client.enqueue('no-history', { n: 1 });
    await waitFor('the run deleted', async () => (await rowsOfRun(env, unwatched)).runs === 0);
    const late = await expectCycloneError(env.client.result(unwatched, { timeout: 1_000 }), RunNotFoundError, 'run_not_found');
    expect(late.message).toContain('retention 0');
    await expectCycloneError(env.client.getRun(unwatched), RunNotFoundError, 'run_not_found');
  });

  it('keeps a failed job for the default retention, so that its failure is seen', async () => {
    const permanent = await env.client.enqueue('no-history-failing', { permanent: true });
    const exhausted = await env.client.enqueue('no-history-failing', { permanent: false });
    for (const id of [permanent, exhausted]) {
      await waitFor('the run failed', async () => (await env.client.getRun(id)).state === 'failed');
      const [row] = await sql<{ days: number }>(
        env,
        'SELECT extract(epoch FROM delete_after - finished_at)::int / 86400 AS days FROM cyclone_runs WHERE id = $1',
        [id],
      );
      expect(row.days).toBe(7);
    }
    const steps = await env.client.listSteps(exhausted);
    expect(steps[0]).toMatchObject({ state: 'discarded', attempt: 2 });
  });
});
