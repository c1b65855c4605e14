import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { CycloneDatabase, Step, Workflow, defineStep, type WorkflowContext } from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { closeAll } from './support/handler-probe.js';
import { waitFor } from './support/wait.js';

/**
 * A fan-out of a thousand steps from a workflow on a queue of one worker
 * slot: the waiting workflow holds no slot (a second run on that queue goes
 * to completion meanwhile), its fan-out is recorded in one statement, and it
 * is replayed a few times, not a thousand.
 */

const FAN_OUT = 1_000;
const Item = defineStep<{ i: number }, number>('fan_item', { queue: 'work' });
/** Items wait for this gate before they complete, so the fan-out stays unfinished while the second run goes. */
let open = (): void => undefined;
let opened: Promise<void> = Promise.resolve();
function closeGate(): void {
  opened = new Promise<void>((resolve) => (open = resolve));
}

@Injectable()
class FanSteps {
  @Step(Item)
  async item(input: { i: number }) {
    await opened;
    return input.i;
  }
}

@Injectable()
class FanFlows {
  @Workflow('fan', { queue: 'flows' })
  async fan(_input: unknown, wf: WorkflowContext) {
    const items = await Promise.all(Array.from({ length: FAN_OUT }, (_, i) => wf.step(`item-${i}`, Item, { i })));
    return items.reduce((sum, n) => sum + n, 0);
  }

  @Workflow('small', { queue: 'flows' })
  async small(_input: unknown, wf: WorkflowContext) {
    const a = await wf.run('a', () => 1);
    const b = await wf.run('b', () => 2);
    return a + b;
  }
}

const envs: CycloneTestEnv[] = [];
afterEach(async () => {
  open();
  await closeAll(envs);
});

describe('a fan-out of a thousand steps', () => {
  it('holds no worker slot while it waits, is recorded in one statement, and is replayed a few times', async () => {
    closeGate();
    const env = await CycloneTestEnv.create({
      providers: [FanSteps, FanFlows],
      queues: { flows: { workers: 1 }, work: { workers: 4 } },
      pollInterval: [20, 50],
    });
    envs.push(env);
    const pool = env.app.get(CycloneDatabase).pool;
    const fan = await env.client.start('fan', null);
    const node = async () =>
      (
        await pool.query<{ state: string; lease_owner: string | null; passes: number; recorded: Date[] }>(
          `SELECT w.state, w.lease_owner, w.lease_generation::int AS passes,
                  (SELECT array_agg(DISTINCT s.created_at) FROM cyclone_steps s WHERE s.run_id = w.run_id AND s.node_type = 'step') AS recorded
             FROM cyclone_steps w WHERE w.run_id = $1 AND w.node_type = 'workflow'`,
          [fan],
        )
      ).rows[0];
    await waitFor('the fan-out to be recorded and the workflow to wait', async () => {
      const n = await node();
      return n.state === 'pending' && n.recorded?.length === 1;
    });
    // Every step of the fan-out was inserted by one statement (one transaction time).
    const { rows: counted } = await pool.query(`SELECT count(*)::int AS n FROM cyclone_steps WHERE run_id = $1 AND node_type = 'step'`, [fan]);
    expect(counted[0].n).toBe(FAN_OUT);
    expect(await node()).toMatchObject({ state: 'pending', lease_owner: null, passes: 1 });

    // The queue's one slot is free: another run goes through it while the fan-out waits.
    const small = await env.client.start('small', null);
    expect(await env.client.result(small, { timeout: 20_000 })).toBe(3);
    expect((await env.client.getRun(fan)).state).toBe('running');

    open();
    const expected = (FAN_OUT * (FAN_OUT - 1)) / 2;
    expect(await env.client.result(fan, { timeout: 60_000 })).toBe(expected);
    const passes = (await node()).passes;
    expect(passes).toBeGreaterThanOrEqual(2);
    expect(passes).toBeLessThan(20);
  }, 120_000);
});
