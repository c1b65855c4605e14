import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import pg from 'pg';
import { Step, type StepContext } from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { firstPollTick } from './support/handler-probe.js';
import { waitFor } from './support/wait.js';

/**
 * A worker's claims read each priority band of its queue from a floor its
 * last claim returned (sql/functions/claim-bands.sql), so that a held-back
 * vacuum does not make every claim read the steps claimed before it. What
 * a user relies on is that no step is left behind by it: a step that
 * becomes available below the floors (an enqueue whose transaction commits
 * long after it began, a job due at a time already past) still runs, and a
 * band of a priority the worker has not claimed from yet is still claimed
 * first.
 */

const started: { tag: string; at: number }[] = [];

@Injectable()
class FloorSteps {
  @Step('floor_job')
  async run(input: { tag: string }, _ctx: StepContext) {
    started.push({ tag: input.tag, at: Date.now() });
    return null;
  }
}

let env: CycloneTestEnv;
let app: pg.Client;

beforeAll(async () => {
  env = await CycloneTestEnv.create({ providers: [FloorSteps], queues: { default: { workers: 2 } } });
  await firstPollTick(env);
  app = new pg.Client({ connectionString: env.databaseUrl });
  await app.connect();
});

afterAll(async () => {
  await app.end();
  await env.close();
});

const ranTag = (tag: string) => async () => started.some((s) => s.tag === tag);

/** Jobs enqueued and run one after another: the worker's claims move its floor to about now. */
async function moveFloors(prefix: string): Promise<void> {
  for (let i = 0; i < 5; i++) {
    // From SQL: the worker claims it (an enqueue of this client would start it in its own statement).
    await app.query(`SELECT cyclone_enqueue('floor_job', $1::jsonb)`, [JSON.stringify({ tag: `${prefix}-${i}` })]);
    await waitFor(`${prefix}-${i} to start`, ranTag(`${prefix}-${i}`), 10_000);
  }
}

describe('claim floors', () => {
  it('runs a job enqueued by a transaction that commits long after it began, while other jobs are claimed past it', async () => {
    await moveFloors('before');
    const slow = new pg.Client({ connectionString: env.databaseUrl });
    await slow.connect();
    try {
      await slow.query('BEGIN');
      // Due from its transaction's start: below the floors the claims below move past it.
      await slow.query(`SELECT cyclone_enqueue('floor_job', '{"tag": "slow"}')`);
      // Other jobs are claimed until one due more than the floors' second of slack after it has run.
      for (let round = 0; !(await floorsPast(slow)); round++) {
        if (round === 50) throw new Error('no job due after the slow transaction began was claimed');
        await moveFloors(`during-${round}`);
      }
      await slow.query('COMMIT');
    } finally {
      await slow.end();
    }
    await waitFor('the slow transaction’s job to start', ranTag('slow'), 15_000);
  });

  it('runs a job whose due time is already past when it is enqueued', async () => {
    await moveFloors('past');
    const at = new Date(Date.now() - 3_600_000).toISOString();
    await app.query(`SELECT cyclone_enqueue('floor_job', '{"tag": "an-hour-ago"}', jsonb_build_object('processAt', $1::text))`, [at]);
    await waitFor('the job due an hour ago to start', ranTag('an-hour-ago'), 15_000);
  });

  it('claims a band of a higher priority it has not claimed from before ahead of its own band', async () => {
    await moveFloors('band');
    // Held back by a paused queue, so that both bands wait when the queue resumes.
    await env.client.pauseQueue('default');
    for (let i = 0; i < 6; i++) {
      await app.query(`SELECT cyclone_enqueue('floor_job', $1::jsonb)`, [JSON.stringify({ tag: `low-${i}` })]);
    }
    await app.query(`SELECT cyclone_enqueue('floor_job', '{"tag": "high"}', '{"priority": 9}')`);
    const before = started.length;
    await env.client.resumeQueue('default');
    await waitFor('every held job to start', async () => started.length >= before + 7, 15_000);
    expect(started.slice(before, before + 2).map((s) => s.tag)).toContain('high');
  });
});

/**
 * Whether some step claimed after `slow` began was due later than its job:
 * the claims that took it moved their floor past the slow job's due time.
 */
async function floorsPast(slow: pg.Client): Promise<boolean> {
  const { rows } = await app.query(
    `SELECT count(*)::int AS n FROM cyclone_steps
      WHERE kind = 'floor_job' AND state = 'completed' AND scheduled_at > $1::timestamptz + interval '1 second'`,
    [(await slow.query(`SELECT now() AS began`)).rows[0].began],
  );
  return rows[0].n > 0;
}
