import { afterAll, describe, expect, it } from '@jest/globals';
import { CycloneTestEnv, TestDatabase } from 'cyclone-nestjs/testing';
import { BackoffSteps, HANG_BACKOFF_MS, HANG_KIND, HangFlow } from './crash/backoff-steps.js';
import { WorkerFleet } from './crash/worker-fleet.js';
import { testServerUrl } from './support/nest-app-harness.js';
import { sql } from './support/sql.js';
import { waitFor } from './support/wait.js';

/**
 * SPEC §16: "A replica that sweeps a step whose kind it does not run uses
 * that step's own backoff, never silently the default" (River had this bug:
 * riverqueue/river#1105). The step's attempt times out on the database clock
 * while its worker is dead, and the only replica left to sweep it does not
 * register the kind.
 */

let fleet: WorkerFleet | undefined;
const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  await fleet?.killAll();
  for (const close of closers.reverse()) await close().catch(() => undefined);
});

describe('a sweep on a replica that does not run the kind', () => {
  it("applies the kind's own backoff to the attempt it consumes, for a job and for a workflow node", async () => {
    WorkerFleet.assertBuilt();
    const db = await TestDatabase.create(testServerUrl());
    closers.push(() => db.drop());

    // The writer runs the kind (an API replica that enqueues it), so the steps it writes carry the kind's backoff. Then it goes.
    const writer = await CycloneTestEnv.create({
      databaseUrl: db.url,
      isolate: false,
      providers: [BackoffSteps],
      workflows: [HangFlow],
      runWorkers: false,
    });
    const job = await writer.client.enqueue(HANG_KIND, {});
    const flow = await writer.client.start(HangFlow, {});
    await writer.close();

    // A worker of the kind claims both and dies holding them, before their 400 ms timeout: it cannot record anything.
    fleet = new WorkerFleet({ databaseUrl: db.url, leaseTtlMs: 10_000, pollMs: [50, 200], slots: 2 });
    const worker = fleet.spawn();
    await worker.whenReady;
    await waitFor(
      'the worker to claim both',
      async () => {
        const [{ n }] = await sql(db.url, `SELECT count(*)::int AS n FROM cyclone_steps WHERE state = 'running' AND lease_owner = $1`, [
          worker.owner,
        ]);
        return n === 2;
      },
      15_000,
    );
    await fleet.kill(worker);

    // The only live replica: it registers no step at all, and sweeps.
    const sweeper = await CycloneTestEnv.create({ databaseUrl: db.url, isolate: false, providers: [], workers: 1 });
    closers.push(() => sweeper.close());
    const swept = await waitFor(
      'the sweep to consume both timed-out attempts',
      async () => {
        const rows = await sql<{ run_id: string; attempt: number; error_kind: string; delay_ms: number }>(
          db.url,
          `SELECT run_id, attempt, error_kind, (extract(epoch FROM scheduled_at - updated_at) * 1000)::int AS delay_ms
             FROM cyclone_steps WHERE run_id = ANY ($1::uuid[]) AND state = 'available' ORDER BY run_id`,
          [[job, flow]],
        );
        return rows.length === 2 ? rows : undefined;
      },
      15_000,
    );
    for (const step of swept) {
      expect(step).toMatchObject({ attempt: 2, error_kind: 'timeout' });
      // The kind's 10 minutes, not the default's 1 s ± 10 %.
      expect(Math.abs(step.delay_ms - HANG_BACKOFF_MS)).toBeLessThan(1_000);
    }
  }, 60_000);
});
