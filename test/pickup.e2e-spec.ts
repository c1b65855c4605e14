import { afterEach, describe, expect, it } from '@jest/globals';
import { CrashRig } from './crash/crash-rig.js';
import { CREATE_PICKUP_TABLES, PICKUP_KIND, PickupSteps } from './crash/pickup-steps.js';
import { waitFor } from './support/wait.js';

/**
 * No step waits while a worker of its queue has a free slot, with real
 * worker processes (test/crash/crash-worker.ts). A worker draining a backlog
 * of quick steps claims ahead of its slots (ClaimAhead); the steps it holds
 * at hand must not wait for its own slots while another process idles, nor
 * for a whole lease when the process holding them dies.
 */

/** The default lease: a step that waited for it would wait 30 s. */
const LEASE_TTL_MS = 30_000;
const POLL_MS: [number, number] = [50, 200];
let rig: CrashRig | undefined;

afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

interface Start {
  run_id: string;
  pid: number;
  started_at: Date;
}

const startsOf = async (runIds: string[]) =>
  (
    await rig!.pool.query<Start>(
      'SELECT run_id, pid, started_at FROM pickup_starts WHERE run_id = ANY ($1::uuid[]) ORDER BY started_at',
      [runIds],
    )
  ).rows;

/** Steps of `runIds` claimed by `owner` whose handler was not entered under that claim: at hand. */
async function atHand(owner: string, runIds: string[]): Promise<string[]> {
  const { rows } = await rig!.pool.query<{ run_id: string }>(
    `SELECT s.run_id FROM cyclone_steps s
      WHERE s.state = 'running' AND s.lease_owner = $1 AND s.run_id = ANY ($2::uuid[])
        AND NOT EXISTS (SELECT 1 FROM pickup_starts p WHERE p.run_id = s.run_id AND p.fencing_token = s.lease_generation)`,
    [owner, runIds],
  );
  return rows.map((r) => r.run_id);
}

describe('pickup with claiming ahead (real worker processes)', () => {
  it('steps a busy worker holds at hand start at once in an idle one: each begins before the first of them ends', async () => {
    rig = await CrashRig.create({
      tables: CREATE_PICKUP_TABLES,
      providers: [PickupSteps],
      fleet: { leaseTtlMs: LEASE_TTL_MS, pollMs: POLL_MS, slots: 4 },
      workers: 2,
    });
    const { client } = rig.env;
    // A backlog of quick steps, so that both processes claim ahead, then as
    // many timed steps as the two have slots: each has a slot free for it.
    await client.enqueueMany(PICKUP_KIND, Array.from({ length: 3_000 }, () => ({})));
    const HANDLER_MS = 700;
    const timed = await client.enqueueMany(PICKUP_KIND, Array.from({ length: 8 }, () => ({ ms: HANDLER_MS })));

    const starts = await waitFor('every timed step started', async () => {
      const rows = await startsOf(timed);
      return rows.length >= timed.length && rows;
    }, 60_000);
    // Each once, spread over both processes.
    expect(new Set(starts.map((s) => s.run_id)).size).toBe(timed.length);
    expect(starts).toHaveLength(timed.length);
    expect(new Set(starts.map((s) => s.pid)).size).toBe(2);
    // A step held at hand by a process whose slots were all busy would have
    // started only when one of them freed, HANDLER_MS after its neighbours.
    const spread = starts[starts.length - 1].started_at.getTime() - starts[0].started_at.getTime();
    expect(spread).toBeLessThan(HANDLER_MS);

    await waitFor('every step completed', async () => {
      const { rows } = await rig!.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM cyclone_steps WHERE state <> 'completed'`);
      return rows[0].n === 0;
    }, 60_000);
  });

  it('steps a worker held at hand when it was SIGKILLed start in another well before its lease would have ended', async () => {
    rig = await CrashRig.create({
      tables: CREATE_PICKUP_TABLES,
      providers: [PickupSteps],
      fleet: { leaseTtlMs: LEASE_TTL_MS, pollMs: POLL_MS, slots: 3 },
      workers: 1,
    });
    const { client } = rig.env;
    const [doomed] = rig.fleet.processes;
    // Two of its three slots run steps that outlast the test, leased for the whole TTL…
    const anchors = await client.enqueueMany(PICKUP_KIND, [{ ms: 120_000 }, { ms: 120_000 }]);
    await waitFor('both anchors started', async () => (await startsOf(anchors)).length === 2, 30_000);
    // …and the third drains quick steps, claiming ahead, until the tail arrives.
    await client.enqueueMany(PICKUP_KIND, Array.from({ length: 1_000 }, () => ({})));
    const tail = await client.enqueueMany(PICKUP_KIND, Array.from({ length: 6 }, () => ({ ms: 120_000 })));
    await waitFor('tail steps at hand in the worker', async () => (await atHand(doomed.owner!, tail)).length > 0, 30_000);
    await rig.fleet.kill(doomed);
    const held = await atHand(doomed.owner!, tail);
    expect(held.length).toBeGreaterThan(0);

    const heir = rig.fleet.spawn({ CRASH_SLOTS: '10' });
    await heir.whenReady;
    await waitFor('every step held at hand started in the other worker', async () => {
      const starts = await startsOf(held);
      return held.every((id) => starts.some((s) => s.run_id === id && s.pid === heir.pid));
    }, 20_000);
    // The anchors are still leased to the dead worker: the steps it held at
    // hand did not wait out the lease TTL its running steps hold.
    const { rows: anchorsNow } = await rig.pool.query<{ state: string; owner: string; leased: boolean }>(
      `SELECT state, lease_owner AS owner, lease_expiry > now() AS leased FROM cyclone_steps WHERE run_id = ANY ($1::uuid[])`,
      [anchors],
    );
    expect(anchorsNow).toEqual([
      { state: 'running', owner: doomed.owner, leased: true },
      { state: 'running', owner: doomed.owner, leased: true },
    ]);
    for (const id of held) expect((await startsOf([id])).length).toBe(1);
  });
});
