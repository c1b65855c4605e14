import { afterEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { CRASH_KIND, CREATE_CRASH_TABLES, CrashSteps, type CrashInput } from './crash/crash-steps.js';
import { CrashRig } from './crash/crash-rig.js';
import type { WorkerFleet, WorkerProcess } from './crash/worker-fleet.js';
import { sleep, waitFor } from './support/wait.js';

/**
 * Crash and fault tests with real worker processes (test/crash/crash-worker.ts,
 * compiled into .build by `pretest`) on a real PostgreSQL (SPEC §4, §7, §8):
 * - workers SIGKILLed mid-step while they drain a few hundred jobs: every job
 *   completes, its side effect is applied exactly once, extra invocations are
 *   at most the reclaims, and the kill→reclaim time is about one lease TTL;
 * - a worker frozen past its lease and thawed: its late writes are fenced and
 *   its completions dropped;
 * - a worker's LISTEN connection terminated: it reconnects and NOTIFY wakes it.
 */

const LEASE_TTL_MS = 800;
const POLL_MS: [number, number] = [50, 200];
const SLOTS = 4;
const WORKERS = 3;
const JOBS = 200;
const MIN_KILLS = 5;
let rig: CrashRig | undefined;

afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

/** The rig (test/crash/crash-rig.ts) with the crash tables and step, and `workers` worker processes. */
async function setUp(fleetSettings: { leaseTtlMs: number; pollMs: [number, number]; slots: number }, workers = 0) {
  rig = await CrashRig.create({ tables: CREATE_CRASH_TABLES, providers: [CrashSteps], fleet: fleetSettings, workers });
  return { env: rig.env, pool: rig.pool, fleet: rig.fleet };
}

interface KilledStep {
  runId: string;
  generation: number;
  leaseExpiry: Date;
  /** Whether the killed holder had already written its effect. */
  effectWritten: boolean;
}

interface Kill {
  pid: number;
  /** Database clock just before the worker was frozen: from then on it did nothing. */
  at: Date;
  steps: KilledStep[];
}

/** The running steps a worker holds, and whether each one's handler was called under the current lease. */
const HELD_STEPS = /* sql */ `
SELECT s.run_id, s.lease_generation::int AS generation, s.lease_expiry,
       i.id IS NOT NULL AS invoked, COALESCE(i.effect = 'applied', false) AS effect_written
  FROM cyclone_steps s
  LEFT JOIN crash_invocations i ON i.run_id = s.run_id AND i.fencing_token = s.lease_generation
 WHERE s.state = 'running' AND s.lease_owner = $1
 ORDER BY s.id`;

type HeldRow = { run_id: string; generation: number; lease_expiry: Date; invoked: boolean; effect_written: boolean };

/**
 * SIGKILLs `worker` while it is in the middle of steps. The worker is first
 * frozen (SIGSTOP), so what it holds cannot change while it is inspected; it
 * is killed only if it holds at least one running step and every step it holds
 * has reached its handler (a step claimed a moment before the kill, whose
 * handler never started, would be a reclaim without an invocation and blur the
 * count of extra invocations). Otherwise it is let go (SIGCONT) and the caller
 * tries again a little later.
 */
async function killMidStep(db: pg.Pool, fleetRef: WorkerFleet, worker: WorkerProcess): Promise<Kill | undefined> {
  const [{ now }] = (await db.query<{ now: Date }>('SELECT clock_timestamp() AS now')).rows;
  process.kill(worker.pid, 'SIGSTOP');
  // Statements the worker sent just before it froze may still be landing: wait until two reads agree.
  let held: HeldRow[] = (await db.query<HeldRow>(HELD_STEPS, [worker.owner])).rows;
  let stable = false;
  for (let i = 0; i < 5 && !stable; i++) {
    await sleep(80);
    const again = (await db.query<HeldRow>(HELD_STEPS, [worker.owner])).rows;
    stable = JSON.stringify(again) === JSON.stringify(held);
    held = again;
  }
  if (!stable || held.length === 0 || !held.every((s) => s.invoked)) {
    process.kill(worker.pid, 'SIGCONT');
    return undefined;
  }
  await fleetRef.kill(worker);
  return {
    pid: worker.pid,
    at: now,
    steps: held.map((s) => ({
      runId: s.run_id,
      generation: s.generation,
      leaseExpiry: s.lease_expiry,
      effectWritten: s.effect_written,
    })),
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : Math.round((sorted[mid - 1] + sorted[mid]) / 2);
}

/** `eventually` with the description first, which reads better at the call sites below. */
const waitUntil = <T>(what: string, check: () => T | undefined | Promise<T | undefined>, timeoutMs: number): Promise<T> =>
  waitFor(what, async () => check(), timeoutMs);

const LISTENERS = `SELECT pid FROM pg_stat_activity WHERE application_name = 'cyclone-listener' AND datname = current_database()`;

async function listenerPids(db: pg.Pool): Promise<number[]> {
  return (await db.query<{ pid: number }>(LISTENERS)).rows.map((r) => r.pid);
}

describe('crash recovery with real worker processes', () => {
  it(
    `SIGKILLing workers mid-step: every job completes, its effect is applied exactly once, and killed steps are reclaimed after about one lease TTL`,
    async () => {
      const { env, pool, fleet } = await setUp({ leaseTtlMs: LEASE_TTL_MS, pollMs: POLL_MS, slots: SLOTS }, WORKERS);

      const inputs = (from: number, n: number): CrashInput[] => Array.from({ length: n }, (_, k) => ({ i: from + k }));
      const runIds = await env.client.enqueueMany(CRASH_KIND, inputs(0, JOBS));
      const started = Date.now();
      // A guard, not a budget: the loop ends when the kills are done and every run completed.
      const deadline = started + 120_000;

      const kills: Kill[] = [];
      let nextKillAt = started + 1_000;
      let completed = 0;
      for (;;) {
        const { rows } = await pool.query<{ completed: number; total: number }>(
          `SELECT count(*) FILTER (WHERE state = 'completed')::int AS completed, count(*)::int AS total FROM cyclone_runs`,
        );
        completed = rows[0].completed;
        if (completed === rows[0].total) {
          if (kills.length >= MIN_KILLS) break;
          // This machine drained the jobs faster than the kills came: add more work and keep killing.
          runIds.push(...(await env.client.enqueueMany(CRASH_KIND, inputs(runIds.length, 40))));
        }
        if (Date.now() > deadline) {
          throw new Error(
            `Only ${completed} of ${rows[0].total} runs completed after ${kills.length} kill(s) in 120 s.\n${fleet.tail()}`,
          );
        }
        // Kill only while another ready worker is alive, so a reclaim measures the lease, not a cold start.
        const ready = fleet.readyWorkers();
        if (Date.now() >= nextKillAt && ready.length >= 2) {
          const victim = ready[Math.floor(Math.random() * ready.length)];
          const kill = await killMidStep(pool, fleet, victim);
          if (kill) {
            kills.push(kill);
            fleet.spawn();
            nextKillAt = Date.now() + 1_000 + Math.random() * 600;
          } else {
            nextKillAt = Date.now() + 30;
          }
        }
        await sleep(40);
      }
      const elapsedMs = Date.now() - started;

      // Every run completed: none lost, none failed.
      const runs = await pool.query(`SELECT state, count(*)::int AS n FROM cyclone_runs GROUP BY state`);
      expect(runs.rows).toEqual([{ state: 'completed', n: runIds.length }]);

      const steps = (
        await pool.query<{
          run_id: string;
          state: string;
          attempt: number;
          max_attempts: number;
          reclaims: number;
          generation: number;
          output: { token: number; pid: number; applied: boolean };
          finished_at: Date;
          effect_token: number | null;
          effect_pid: number | null;
          effects: number;
          invoked_tokens: number[];
          late_invocations: number;
          error: string | null;
        }>(`
          SELECT s.run_id, s.state, s.attempt, s.max_attempts, s.reclaims, s.lease_generation::int AS generation,
                 s.output, s.finished_at, s.error,
                 e.fencing_token::int AS effect_token, e.pid AS effect_pid,
                 (SELECT count(*)::int FROM crash_effects x WHERE x.run_id = s.run_id) AS effects,
                 (SELECT COALESCE(array_agg(i.fencing_token::int ORDER BY i.fencing_token), '{}')
                    FROM crash_invocations i WHERE i.run_id = s.run_id) AS invoked_tokens,
                 (SELECT count(*)::int FROM crash_invocations i
                   WHERE i.run_id = s.run_id AND i.started_at > s.finished_at) AS late_invocations
            FROM cyclone_steps s LEFT JOIN crash_effects e ON e.run_id = s.run_id`)
      ).rows;
      expect(steps).toHaveLength(runIds.length);

      const problems: string[] = [];
      for (const s of steps) {
        const where = `run ${s.run_id}`;
        if (s.state !== 'completed') problems.push(`${where}: step ${s.state}`);
        // A crash is not a failure: no attempt consumed, never past the limit, no error stored.
        if (s.attempt !== 1 || s.attempt > s.max_attempts || s.error !== null) {
          problems.push(`${where}: attempt ${s.attempt}/${s.max_attempts}, error ${s.error}`);
        }
        // Exactly one effect, written by the holder that completed the step.
        if (s.effects !== 1) problems.push(`${where}: ${s.effects} effect rows`);
        if (s.effect_token !== s.output.token || s.effect_pid !== s.output.pid || !s.output.applied) {
          problems.push(`${where}: output ${JSON.stringify(s.output)} but effect token ${s.effect_token} pid ${s.effect_pid}`);
        }
        // Every claim beyond the first was a reclaim, or followed a hand-back of a step claimed
        // ahead (to an idle worker, uncounted); the completing claim was the last one.
        if (s.generation < 1 + s.reclaims || s.output.token !== s.generation) {
          problems.push(`${where}: generation ${s.generation}, reclaims ${s.reclaims}, completed by token ${s.output.token}`);
        }
        // The handler ran at most once per claim, each time under a later claim, last under the
        // completing one. A claim may have no call: its worker was killed after the claim
        // committed and before the handler recorded its start.
        const tokens = s.invoked_tokens;
        const rising = tokens.every((t, k) => t >= 1 && (k === 0 || t > tokens[k - 1]));
        if (tokens.length < 1 || !rising || tokens.at(-1) !== s.generation) {
          problems.push(`${where}: handler ran with tokens [${tokens}], claims were 1..${s.generation}`);
        }
        if (s.late_invocations > 0) problems.push(`${where}: ${s.late_invocations} invocation(s) after it completed`);
      }
      expect(problems).toEqual([]);

      const [{ invocations, reclaims, fenced }] = (
        await pool.query<{ invocations: number; reclaims: number; fenced: number }>(`
          SELECT (SELECT count(*)::int FROM crash_invocations) AS invocations,
                 (SELECT sum(reclaims)::int FROM cyclone_steps) AS reclaims,
                 (SELECT count(*)::int FROM crash_invocations WHERE effect = 'fenced') AS fenced`)
      ).rows;
      // At most one more call per reclaim (a claim killed before its call has none).
      const extraInvocations = invocations - runIds.length;
      expect(extraInvocations).toBeLessThanOrEqual(reclaims);

      // Every step a kill left behind was reclaimed and run again, never before its lease expired.
      expect(kills.length).toBeGreaterThanOrEqual(MIN_KILLS);
      const killed = kills.flatMap((k) => k.steps.map((s) => ({ ...s, killedAt: k.at })));
      expect(reclaims).toBeGreaterThanOrEqual(killed.length);
      const killToReclaim: number[] = [];
      const expiryToReclaim: number[] = [];
      for (const k of killed) {
        const { rows } = await pool.query<{ started_at: Date }>(
          'SELECT started_at FROM crash_invocations WHERE run_id = $1 AND fencing_token = $2',
          [k.runId, k.generation + 1],
        );
        expect(rows).toHaveLength(1);
        killToReclaim.push(rows[0].started_at.getTime() - k.killedAt.getTime());
        expiryToReclaim.push(rows[0].started_at.getTime() - k.leaseExpiry.getTime());
      }
      expect(Math.min(...expiryToReclaim)).toBeGreaterThan(0);
      // About TTL plus one poll tick; generous for a loaded 2-core machine.
      expect(Math.max(...expiryToReclaim)).toBeLessThan(POLL_MS[1] + 2_000);
      expect(Math.max(...killToReclaim)).toBeLessThan(LEASE_TTL_MS + POLL_MS[1] + 2_500);

      const afterEffect = killed.filter((k) => k.effectWritten).length;
      const boots = fleet.processes.flatMap((w) => (w.bootMs === undefined ? [] : [w.bootMs]));
      process.stderr.write(
        `\n[crash] ${runIds.length} jobs on ${WORKERS} worker processes (${SLOTS} slots each, leaseTtl ${LEASE_TTL_MS} ms, ` +
          `poll ${POLL_MS[0]}-${POLL_MS[1]} ms) in ${(elapsedMs / 1000).toFixed(1)} s: ` +
          `${kills.length} SIGKILLs survived, ${killed.length} steps killed mid-step (${afterEffect} after writing their effect), ` +
          `0 lost, every run 1 effect row = its completed output; ${extraInvocations} extra invocations, ${reclaims} reclaims; ` +
          `${fenced} stale effect writes fenced; kill->reclaim median ${median(killToReclaim)} ms, max ${Math.max(...killToReclaim)} ms ` +
          `(lease expiry->reclaim median ${median(expiryToReclaim)} ms, max ${Math.max(...expiryToReclaim)} ms); ` +
          `worker process start-up median ${median(boots)} ms\n`,
      );
    },
    180_000,
  );
});

describe('a worker process frozen past its lease', () => {
  it('comes back as a stale holder: its late effect writes are refused by the fence and its completions dropped', async () => {
    const { env, pool, fleet } = await setUp({ leaseTtlMs: LEASE_TTL_MS, pollMs: POLL_MS, slots: 3 }, 2);
    const [stale, other] = fleet.processes;
    // Each handler writes its effect after 600 ms: time enough to freeze a worker before it does.
    const runIds = await env.client.enqueueMany(
      CRASH_KIND,
      Array.from({ length: 12 }, (_, i) => ({ i, ms: 1_000 })),
    );

    // Freeze the worker while it holds steps whose handlers started but have not written their effect.
    let held: HeldRow[] = [];
    await waitUntil(
      'the worker to hold steps before their effect',
      async () => {
        process.kill(stale.pid, 'SIGSTOP');
        held = (await pool.query<HeldRow>(HELD_STEPS, [stale.owner])).rows;
        await sleep(80);
        const again = (await pool.query<HeldRow>(HELD_STEPS, [stale.owner])).rows;
        if (JSON.stringify(again) === JSON.stringify(held) && held.length > 0 && held.every((h) => h.invoked && !h.effect_written)) {
          return true;
        }
        process.kill(stale.pid, 'SIGCONT');
        return undefined;
      },
      10_000,
    );
    try {
      // Its leases expire; the other worker reclaims the steps, writes their effects and completes them.
      await waitUntil(
        'the frozen worker\'s steps to be completed by the other worker',
        async () => {
          const { rows } = await pool.query<{ done: number }>(
            `SELECT count(*)::int AS done FROM cyclone_steps
              WHERE run_id = ANY ($1::uuid[]) AND state = 'completed'`,
            [held.map((h) => h.run_id)],
          );
          return rows[0].done === held.length ? true : undefined;
        },
        15_000,
      );
    } finally {
      process.kill(stale.pid, 'SIGCONT');
    }

    // Thawed, it finishes its handlers with the old tokens: every one of those writes must be refused.
    const stolen = await waitUntil(
      'the stale handlers to try their writes',
      async () => {
        const { rows } = await pool.query<{ run_id: string; effect: string | null }>(
          `SELECT i.run_id, i.effect FROM crash_invocations i
             JOIN unnest($1::uuid[], $2::int[]) AS h(run_id, generation)
               ON i.run_id = h.run_id AND i.fencing_token = h.generation`,
          [held.map((h) => h.run_id), held.map((h) => h.generation)],
        );
        return rows.length === held.length && rows.every((r) => r.effect !== null) ? rows : undefined;
      },
      10_000,
    );
    expect(stolen.map((r) => r.effect)).toEqual(held.map(() => 'fenced'));

    await waitUntil(
      'every run to complete',
      async () => {
        const { rows } = await pool.query<{ open: number }>(
          `SELECT count(*)::int AS open FROM cyclone_runs WHERE state <> 'completed'`,
        );
        return rows[0].open === 0 ? true : undefined;
      },
      15_000,
    );
    // Each run has the one effect of the holder whose completion counted; the stale completions were dropped.
    const { rows: runs } = await pool.query<{ run_id: string; generation: number; output: { token: number; pid: number }; effect_token: number }>(
      `SELECT s.run_id, s.lease_generation::int AS generation, s.output, e.fencing_token::int AS effect_token
         FROM cyclone_steps s JOIN crash_effects e ON e.run_id = s.run_id`,
    );
    expect(runs).toHaveLength(runIds.length);
    for (const r of runs) {
      expect(r.effect_token).toBe(r.output.token);
      expect(r.output.token).toBe(r.generation);
    }
    for (const h of held) {
      const run = runs.find((r) => r.run_id === h.run_id)!;
      expect(run.generation).toBeGreaterThan(h.generation);
      expect(run.output.pid).toBe(other.pid);
    }
    // The stale worker lived through it and is still a working member of the fleet.
    expect(stale.exited).toBe(false);
    const more = await env.client.enqueueMany(CRASH_KIND, [100, 101, 102, 103, 104, 105].map((i) => ({ i, ms: 50 })));
    await Promise.all(more.map((id) => env.client.result(id, { timeout: 10_000 })));

    process.stderr.write(
      `\n[stale holder] worker ${stale.pid} frozen with ${held.length} steps mid-handler; after the other worker took them over, ` +
        `its ${stolen.length} late effect writes were all fenced and its completions dropped\n`,
    );
  }, 40_000);
});

describe('the LISTEN connection of a worker process', () => {
  it('is re-opened by the worker after it is terminated, and NOTIFY wakes the worker again (polling off)', async () => {
    // Polling off: one tick at startup, the next 30 s later. Jobs can only move quickly through NOTIFY.
    const { env, pool, fleet } = await setUp({ leaseTtlMs: 2_000, pollMs: [30_000, 31_000], slots: 3 });
    const QUICK_MS = 5_000;
    const ours = new Set(await listenerPids(pool));
    const worker = fleet.spawn();
    await worker.whenReady;
    const childListener = await waitUntil(
      "the worker's LISTEN connection",
      async () => (await listenerPids(pool)).find((pid) => !ours.has(pid)),
      5_000,
    );

    async function timeJob(i: number): Promise<number> {
      const startedAt = Date.now();
      const runId = await env.client.enqueue(CRASH_KIND, { i, ms: 20 });
      await env.client.result(runId, { timeout: QUICK_MS });
      return Date.now() - startedAt;
    }
    expect(await timeJob(0)).toBeLessThan(QUICK_MS);

    const killedAt = Date.now();
    const [{ killed }] = (await pool.query('SELECT pg_terminate_backend($1) AS killed', [childListener])).rows;
    expect(killed).toBe(true);
    // Enqueued while the worker's listener is down or coming back: its NOTIFYs are lost.
    const inGap = await env.client.enqueueMany(CRASH_KIND, [1, 2, 3, 4, 5].map((i) => ({ i, ms: 20 })));

    const replacement = await waitUntil(
      'the worker to open a new LISTEN connection',
      async () => (await listenerPids(pool)).find((pid) => !ours.has(pid) && pid !== childListener),
      10_000,
    );
    const reconnectMs = Date.now() - killedAt;
    // On reconnect the worker looks again, so the jobs of the gap run without waiting for a poll tick.
    await Promise.all(inGap.map((id) => env.client.result(id, { timeout: QUICK_MS })));
    const gapDoneMs = Date.now() - killedAt;

    // Later jobs are woken over the new connection, one after another.
    const later: number[] = [];
    for (const i of [6, 7, 8]) later.push(await timeJob(i));
    for (const ms of later) expect(ms).toBeLessThan(QUICK_MS);
    expect(worker.exited).toBe(false);
    expect(await listenerPids(pool)).toContain(replacement);
    const { rows } = await pool.query(`SELECT state, count(*)::int AS n FROM cyclone_runs GROUP BY state`);
    expect(rows).toEqual([{ state: 'completed', n: 9 }]);

    process.stderr.write(
      `\n[listener] worker ${worker.pid}: LISTEN backend ${childListener} terminated; new backend ${replacement} after ${reconnectMs} ms; ` +
        `5 jobs enqueued in the gap done ${gapDoneMs} ms after the kill; later jobs ${later.join('/')} ms (polling every 30 s)\n`,
    );
  }, 40_000);
});
