import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { CycloneDatabase, CycloneStats, InvalidKeyError, InvalidOptionError, PermanentError, Snooze, Step, type StepContext } from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { HandlerProbe, testEnvs } from './support/handler-probe.js';
import { countRows, expectCycloneError, expectRejectedWritingNothing } from './support/e2e-helpers.js';
import { sql } from './support/sql.js';
import { sleep, waitFor } from './support/wait.js';
import { FLOW_WORKER_SCRIPT, WorkerFleet } from './crash/worker-fleet.js';
import { FlowKeySweeper } from '../libs/cyclone/src/maintenance/flow-key.sweeper.js';

/**
 * Flow control (SPEC §13) with three replicas on one database: concurrency
 * limits per kind, per key and per queue, rate limits, fair claiming between
 * keys. The replicas run in this process, so one set of counters sees every
 * handler of every replica at once: a limit broken by two replicas claiming
 * together shows up as a count above it.
 */

/** Handlers running now and the most seen at once, per scope ('kind', 'key:a', 'queue', ...). */
class Gauge {
  private readonly now = new Map<string, number>();
  readonly peak = new Map<string, number>();
  async around<T>(scopes: string[], fn: () => Promise<T>): Promise<T> {
    for (const s of scopes) {
      const n = (this.now.get(s) ?? 0) + 1;
      this.now.set(s, n);
      this.peak.set(s, Math.max(n, this.peak.get(s) ?? 0));
    }
    try {
      return await fn();
    } finally {
      for (const s of scopes) this.now.set(s, this.now.get(s)! - 1);
    }
  }
  reset(): void {
    this.now.clear();
    this.peak.clear();
  }
}

const gauge = new Gauge();
const probe = new HandlerProbe();
/** Handler start times by kind, worker clock. */
const starts = new Map<string, { key: string; at: number }[]>();
const started = (kind: string, key = '') => {
  const list = starts.get(kind) ?? [];
  list.push({ key, at: Date.now() });
  starts.set(kind, list);
};

interface Job {
  tenant?: string;
  ms?: number;
  outcome?: 'complete' | 'fail' | 'retry' | 'snooze' | 'timeout' | 'hold';
}

@Injectable()
class FlowSteps {
  @Step('per_kind', { concurrency: { limit: 3 } })
  async perKind(input: Job): Promise<null> {
    await gauge.around(['per_kind'], () => sleep(input.ms ?? 30));
    return null;
  }

  @Step('per_key', { concurrency: { limit: 2, key: (input: Job) => input.tenant! } })
  async perKey(input: Job): Promise<null> {
    await gauge.around([`per_key:${input.tenant}`], () => sleep(input.ms ?? 30));
    return null;
  }

  @Step('capped_a', { queue: 'capped' })
  async cappedA(input: Job): Promise<null> {
    await gauge.around(['capped'], () => sleep(input.ms ?? 30));
    return null;
  }

  @Step('capped_b', { queue: 'capped', concurrency: { limit: 3 } })
  async cappedB(input: Job): Promise<null> {
    await gauge.around(['capped', 'capped_b'], () => sleep(input.ms ?? 30));
    return null;
  }

  @Step('rated', { rateLimit: { limit: 4, per: '400ms' } })
  async rated(): Promise<null> {
    started('rated');
    return null;
  }

  @Step('rated_key', { rateLimit: { limit: 2, per: '400ms', key: (input: Job) => input.tenant! } })
  async ratedKey(input: Job): Promise<null> {
    started('rated_key', input.tenant);
    return null;
  }

  @Step('fair', { concurrency: { limit: 1_000, key: (input: Job) => input.tenant! } })
  async fair(input: Job): Promise<null> {
    started('fair', input.tenant);
    await sleep(input.ms ?? 20);
    return null;
  }

  /** Every way out of running, one job each, under a limit of one. */
  @Step('single', { concurrency: { limit: 1 }, maxAttempts: 2, backoff: () => 10, timeout: '300ms' })
  async single(input: Job, ctx: StepContext): Promise<unknown> {
    return gauge.around(['single'], async () => {
      switch (input.outcome) {
        case 'fail':
          throw new PermanentError('discarded');
        case 'retry':
          if (ctx.attempt === 1) throw new Error('once more');
          return 'retried';
        case 'snooze':
          return ctx.attempt === 1 && ctx.reclaims === 0 && !snoozed.has(ctx.runId)
            ? (snoozed.add(ctx.runId), new Snooze(10))
            : 'snoozed';
        case 'timeout':
          // Stops at its signal: a handler deaf to it would run on past the
          // room its timed-out attempt gave back, which no limit can prevent.
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
          return 'late';
        case 'hold':
          return probe.cooperate(ctx);
        default:
          return 'done';
      }
    });
  }

  @Step('bad_key', { concurrency: { limit: 2, key: (input: { tenant?: unknown }) => input.tenant as string } })
  async badKey(): Promise<null> {
    return null;
  }

  @Step('throwing_key', {
    rateLimit: {
      limit: 5,
      per: '1s',
      key: (input: { tenant?: string }) => {
        if (!input.tenant) throw new Error('no tenant');
        return input.tenant;
      },
    },
  })
  async throwingKey(): Promise<null> {
    return null;
  }
}
const snoozed = new Set<string>();

const { createEnv, replicaOf } = testEnvs([FlowSteps], probe);

/** Three clients on one database, each with `workers` slots on default and on capped. */
async function threeReplicas(workers = 4, options: Parameters<typeof createEnv>[0] = {}): Promise<CycloneTestEnv[]> {
  gauge.reset();
  starts.clear();
  const queues = { default: { workers }, capped: { workers, concurrency: 4 } };
  const first = await createEnv({ queues, ...options });
  return [first, await replicaOf(first, { queues, ...options }), await replicaOf(first, { queues, ...options })];
}

async function drain(env: CycloneTestEnv, runIds: string[], timeoutMs = 30_000): Promise<void> {
  await waitFor(
    `${runIds.length} runs to complete`,
    async () => {
      const [{ n }] = await sql(env, `SELECT count(*)::int AS n FROM cyclone_runs WHERE state = 'completed' AND id = ANY ($1)`, [runIds]);
      return n === runIds.length;
    },
    timeoutMs,
  );
}

/** Enqueues `count` jobs of `kind` spread over the replicas, concurrently. */
async function enqueueSpread(envs: CycloneTestEnv[], kind: string, inputs: Job[]): Promise<string[]> {
  return Promise.all(inputs.map((input, i) => envs[i % envs.length].client.enqueue(kind, input)));
}

describe('concurrency limits across three replicas', () => {
  it('a kind-wide limit: never more than `limit` running in the cluster, and the limit is reached', async () => {
    const envs = await threeReplicas(4);
    const runIds = await enqueueSpread(envs, 'per_kind', Array.from({ length: 60 }, () => ({ ms: 40 })));
    await drain(envs[0], runIds);
    expect(gauge.peak.get('per_kind')).toBe(3);
  });

  it('claims of three replicas at the same instant never take the same room twice', async () => {
    const envs = await threeReplicas(6);
    const db = envs[0].app.get(CycloneDatabase).pool;
    for (let round = 0; round < 3; round++) {
      // Every claim reads cyclone_paused_queues first: holding that table
      // makes the three replicas' claims wait at one point, then all go at once.
      const barrier = await db.connect();
      try {
        await barrier.query('BEGIN');
        await barrier.query('LOCK TABLE cyclone_paused_queues IN ACCESS EXCLUSIVE MODE');
        const runIds = [
          ...(await envs[round % 3].client.enqueueMany('per_kind', Array.from({ length: 12 }, () => ({ ms: 150 })))),
          ...(await envs[round % 3].client.enqueueMany('per_key', Array.from({ length: 12 }, () => ({ tenant: 'r', ms: 150 })))),
        ];
        await waitFor(
          'claims of every replica to wait at the barrier',
          async () => {
            const [{ n }] = await sql(
              envs[0],
              `SELECT count(DISTINCT client_addr::text || client_port)::int AS n FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%cyclone_claim_flow%'`,
            );
            return n >= 3;
          },
          10_000,
        );
        await barrier.query('COMMIT');
        await drain(envs[0], runIds);
      } finally {
        barrier.release();
      }
    }
    expect(gauge.peak.get('per_kind')).toBe(3);
    expect(gauge.peak.get('per_key:r')).toBe(2);
  });

  it('a per-key limit: never more than `limit` of one key, while keys run side by side', async () => {
    const envs = await threeReplicas(6);
    const tenants = ['a', 'b', 'c'];
    const runIds = await enqueueSpread(
      envs,
      'per_key',
      Array.from({ length: 60 }, (_, i) => ({ tenant: tenants[i % 3], ms: 40 })),
    );
    await drain(envs[0], runIds);
    for (const t of tenants) expect(gauge.peak.get(`per_key:${t}`)).toBe(2);
    // The keys are stored with the steps.
    const keys = await sql(envs[0], `SELECT DISTINCT flow_key FROM cyclone_steps WHERE kind = 'per_key' ORDER BY 1`);
    expect(keys.map((r) => r.flow_key)).toEqual(tenants);
  });

  it("a queue's cap holds for all its kinds together, limited or not, across the replicas", async () => {
    const envs = await threeReplicas(4);
    const runIds = [
      ...(await enqueueSpread(envs, 'capped_a', Array.from({ length: 40 }, () => ({ ms: 40 })))),
      ...(await enqueueSpread(envs, 'capped_b', Array.from({ length: 40 }, () => ({ ms: 40 })))),
    ];
    await drain(envs[0], runIds);
    // 12 slots on the queue across the replicas, capped at 4; capped_b also at 3 of its own.
    expect(gauge.peak.get('capped')).toBe(4);
    expect(gauge.peak.get('capped_b')).toBeLessThanOrEqual(3);
  });

  it('every way out of running frees the room: completed, retried, discarded, snoozed, timed out, cancelled, handed back', async () => {
    const envs = await threeReplicas(3, { shutdownTimeout: 200, leaseTtl: 900 });
    const [a, b] = envs;
    const outcomes: Job['outcome'][] = ['retry', 'fail', 'snooze', 'timeout', 'complete'];
    const runIds: string[] = [];
    for (const outcome of outcomes) runIds.push(await a.client.enqueue('single', { outcome }));
    for (const id of runIds) await a.runUntilComplete(id, { timeout: 20_000 });
    expect(gauge.peak.get('single')).toBe(1);
    const states = await Promise.all(runIds.map(async (id) => (await a.client.getRun(id)).state));
    expect(states).toEqual(['completed', 'failed', 'completed', 'failed', 'completed']);

    // Cancelled while running: the next one starts. (The cancelled handler
    // learns at its next heartbeat, and may still be running when the next
    // one starts: the limit is on running steps, which the cancel ended.)
    const held = await a.client.enqueue('single', { outcome: 'hold' }, { timeout: '30s' });
    await probe.call(held);
    const next = await b.client.enqueue('single', { outcome: 'complete' });
    await Promise.all([a, b].map((env) => env.waitForPasses('cyclone:claim', 2)));
    expect((await a.client.getRun(next)).state).toBe('running');
    expect((await a.client.listSteps(next))[0].state).toBe('available');
    await a.client.cancel(held);
    await a.runUntilComplete(next, { timeout: 10_000 });

    // Handed back at shutdown: the replica holding it closes, another one takes it.
    const handed = await a.client.enqueue('single', { outcome: 'hold' }, { timeout: '30s' });
    const call = await probe.call(handed);
    const [{ lease_owner }] = await sql(a, 'SELECT lease_owner FROM cyclone_steps WHERE run_id = $1', [handed]);
    const owner = envs.find((e) => e.app.get(CycloneStats).clientId === lease_owner)!;
    await owner.app.close();
    envs.splice(envs.indexOf(owner), 1);
    expect(call.signal.aborted).toBe(true);
    const other = envs[0];
    // Held again by a live replica: the room was given back with the step.
    await waitFor('the handed-back step to run again', async () => probe.of(handed).length === 2, 10_000);
    probe.releaseAll();
    await other.runUntilComplete(handed, { timeout: 10_000 });
    expect((await other.client.getRun(handed)).state).toBe('completed');
  }, 60_000);
});

describe('a holder SIGKILLed while it holds the room', () => {
  @Injectable()
  class HeldSlotSteps {
    // The kind of test/flow/flow-worker.ts, with the same limit, run here quickly.
    @Step('held_slot', { concurrency: { limit: 1 } })
    async hold(_input: unknown, ctx: StepContext): Promise<{ pid: number; reclaims: number }> {
      return { pid: process.pid, reclaims: ctx.reclaims };
    }
  }

  let fleet: WorkerFleet | undefined;
  afterEach(async () => {
    await fleet?.killAll();
    fleet = undefined;
  });

  it('gets its room back with its lease: the sweep reclaims the step, and the limit lets the next one run', async () => {
    WorkerFleet.assertBuilt(FLOW_WORKER_SCRIPT);
    const owner = await createEnv({ runWorkers: false, providers: [HeldSlotSteps] });
    fleet = new WorkerFleet(
      { databaseUrl: owner.databaseUrl, leaseTtlMs: 800, pollMs: [50, 200], slots: 3, reportPasses: true },
      FLOW_WORKER_SCRIPT,
    );
    const worker = fleet.spawn({ FLOW_HOLD_MS: '60000' });
    await worker.whenReady;
    const [first, second] = [await owner.client.enqueue('held_slot', {}), await owner.client.enqueue('held_slot', {})];
    await waitFor('the worker process to hold the first step', async () => {
      const [row] = await sql(owner, 'SELECT state, lease_owner FROM cyclone_steps WHERE run_id = $1', [first]);
      return row.state === 'running' && row.lease_owner === worker.owner;
    });
    // Three free slots, but the limit is one: the second waits, claim after claim.
    await fleet.waitForPasses(worker, 'cyclone:claim', 3);
    expect((await owner.client.listSteps(second))[0].state).toBe('available');

    const [{ lease_expiry: leaseAtKill }] = await sql(owner, 'SELECT lease_expiry FROM cyclone_steps WHERE run_id = $1', [first]);
    await fleet.kill(worker);
    const replica = await replicaOf(owner, { providers: [HeldSlotSteps], leaseTtl: 800 });
    await replica.runUntilComplete(first, { timeout: 15_000 });
    await replica.runUntilComplete(second, { timeout: 15_000 });
    const rows = await sql(owner, 'SELECT run_id, started_at, finished_at, reclaims FROM cyclone_steps ORDER BY id');
    expect(rows.map((r) => r.reclaims)).toEqual([1, 0]);
    // Nothing ran in the dead holder's room before its lease expired, and one at a time after.
    for (const r of rows) expect((r.started_at as Date).getTime()).toBeGreaterThanOrEqual((leaseAtKill as Date).getTime());
    expect((rows[1].started_at as Date).getTime()).toBeGreaterThanOrEqual((rows[0].finished_at as Date).getTime());
  }, 40_000);
});

describe('a limit added to or removed from a kind with a backlog', () => {
  @Injectable()
  class Unlimited {
    @Step('changing')
    async run(input: Job): Promise<null> {
      await gauge.around(['changing'], () => sleep(input.ms ?? 20));
      return null;
    }
  }
  @Injectable()
  class Limited {
    @Step('changing', { concurrency: { limit: 1, key: (input: Job) => input.tenant! } })
    async run(input: Job): Promise<null> {
      await gauge.around(['changing', `changing:${input.tenant}`], () => sleep(input.ms ?? 20));
      return null;
    }
  }

  it('the queued steps are keyed (at startup) or unkeyed (at the next sweep) and run under the new rules', async () => {
    gauge.reset();
    const owner = await createEnv({ runWorkers: false, providers: [Unlimited] });
    const before = await owner.client.enqueueMany('changing', Array.from({ length: 12 }, (_, i) => ({ tenant: `t${i % 3}`, ms: 40 })));
    // Now the kind has a per-key limit: the backlog gets its keys and runs one per key at a time.
    const limited = await replicaOf(owner, { providers: [Limited], workers: 6 });
    await drain(owner, before);
    for (const t of ['t0', 't1', 't2']) expect(gauge.peak.get(`changing:${t}`)).toBe(1);
    expect(gauge.peak.get('changing')).toBe(3);
    await limited.client.pauseQueue('default');
    const queued = await limited.client.enqueueMany('changing', Array.from({ length: 6 }, (_, i) => ({ tenant: 't0', ms: 40 + i })));
    expect((await sql(owner, `SELECT count(*)::int AS n FROM cyclone_steps WHERE flow_key = 't0' AND state = 'available'`))[0].n).toBe(6);
    // And the limit removed again: those steps go back to the plain claim, all
    // at once. (An app without limits sweeps a minute after it starts; here, now.)
    gauge.reset();
    const unlimited = await replicaOf(owner, { providers: [Unlimited], workers: 6 });
    expect(await unlimited.app.get(FlowKeySweeper).sweep()).toEqual({ keyed: 0, unkeyed: 6 });
    await limited.client.resumeQueue('default');
    await limited.app.close();
    await drain(owner, queued);
    expect(gauge.peak.get('changing')).toBeGreaterThan(1);
  }, 30_000);
});

describe('rate limits across three replicas', () => {
  /** The most starts in any window of `per` ms, from the steps' started_at (database clock). */
  async function busiestWindow(env: CycloneTestEnv, kind: string, perMs: number, byKey = false): Promise<number> {
    const rows = await sql<{ flow_key: string; at: number }>(
      env,
      `SELECT flow_key, extract(epoch FROM started_at) * 1000 AS at FROM cyclone_steps WHERE kind = $1 ORDER BY started_at`,
      [kind],
    );
    let most = 0;
    for (let i = 0; i < rows.length; i++) {
      let n = 0;
      for (let j = i; j < rows.length && Number(rows[j].at) < Number(rows[i].at) + perMs; j++) {
        if (!byKey || rows[j].flow_key === rows[i].flow_key) n += 1;
      }
      most = Math.max(most, n);
    }
    return most;
  }

  it('no window of `per` ever holds more than `limit` starts, cluster-wide; the rate is reached', async () => {
    const envs = await threeReplicas(4);
    const t0 = Date.now();
    const runIds = await enqueueSpread(envs, 'rated', Array.from({ length: 20 }, () => ({})));
    await drain(envs[0], runIds, 20_000);
    const elapsed = Date.now() - t0;
    expect(await busiestWindow(envs[0], 'rated', 400)).toBeLessThanOrEqual(4);
    expect(await busiestWindow(envs[0], 'rated', 400)).toBeGreaterThanOrEqual(3);
    // 20 starts at 4 per 400 ms take at least four more windows after the first.
    expect(elapsed).toBeGreaterThanOrEqual(1_500);
  });

  it('per key: each key has its own window', async () => {
    const envs = await threeReplicas(4);
    const runIds = await enqueueSpread(
      envs,
      'rated_key',
      Array.from({ length: 16 }, (_, i) => ({ tenant: i % 2 ? 'x' : 'y' })),
    );
    await drain(envs[0], runIds, 20_000);
    expect(await busiestWindow(envs[0], 'rated_key', 400, true)).toBeLessThanOrEqual(2);
    // Both keys start in the first window: one does not wait for the other.
    const firsts = ['x', 'y'].map((t) => starts.get('rated_key')!.find((s) => s.key === t)!.at);
    expect(Math.abs(firsts[0] - firsts[1])).toBeLessThan(300);
  });
});

describe('fair claiming between keys', () => {
  it("a key with 100,000 queued steps delays another key's first step by at most a few claims", async () => {
    const envs = await threeReplicas(4);
    const [a] = envs;
    const chunk = Array.from({ length: 5_000 }, () => ({ tenant: 'big', ms: 20 }));
    for (let i = 0; i < 20; i++) await a.client.enqueueMany('fair', chunk);
    await waitFor('the big key to be running', async () => (starts.get('fair')?.length ?? 0) > 20, 10_000);
    const before = starts.get('fair')!.length;
    await envs[1].client.enqueue('fair', { tenant: 'small', ms: 20 });
    await waitFor('the small key to start', async () => starts.get('fair')!.some((s) => s.key === 'small'), 10_000);
    const list = starts.get('fair')!;
    const bigStartsBetween = list.slice(before).findIndex((s) => s.key === 'small');
    // 12 slots across the replicas; "a few claims" is a few times that at most.
    expect(bigStartsBetween).toBeLessThanOrEqual(3 * 12);
    process.stderr.write(`\n[fairness] ${bigStartsBetween} steps of the 100,000-step key started before the other key's first\n`);
    for (const env of envs) await env.client.pauseQueue('default');
  }, 60_000);
});

describe('bad flow options and key functions', () => {
  it('limit 0, a negative or zero window, an unknown option: startup fails with InvalidOptionError naming the kind', async () => {
    const cases: [object, RegExp][] = [
      [{ concurrency: { limit: 0 } }, /concurrency\.limit.*from 1/],
      [{ rateLimit: { limit: 3, per: -5 } }, /rateLimit\.per/],
      [{ rateLimit: { limit: 3, per: 0 } }, /rateLimit\.per/],
      [{ rateLimit: { limit: 3 } }, /rateLimit\.per" is required/],
      [{ concurrency: { limit: 2, key: 'tenant' } }, /concurrency\.key" must be a function/],
      [{ concurrency: { limit: 2, keys: () => 'x' } }, /Unknown option "keys"/],
    ];
    for (const [options, message] of cases) {
      @Injectable()
      class BadSteps {
        @Step('bad_flow', options)
        async run(): Promise<null> {
          return null;
        }
      }
      const err = await expectCycloneError(CycloneTestEnv.create({ providers: [BadSteps] }), InvalidOptionError, 'invalid_option');
      expect(err.message).toMatch(/@Step\('bad_flow'\)/);
      expect(err.message).toMatch(message);
    }
    await expectCycloneError(
      CycloneTestEnv.create({ queues: { default: { workers: 2, concurrency: 0 } } }),
      InvalidOptionError,
      'invalid_option',
    );
  });

  it('a key function that returns a non-string or throws fails that enqueue with InvalidKeyError and writes nothing', async () => {
    const env = await createEnv({ runWorkers: false });
    for (const tenant of [undefined, 7, null, { id: 1 }]) {
      const err = await expectRejectedWritingNothing(env, () => env.client.enqueue('bad_key', { tenant }), InvalidKeyError, 'invalid_key');
      expect(err.message).toMatch(/concurrency\.key function of step "bad_key" returned .*not a string/);
    }
    const thrown = await expectRejectedWritingNothing(env, () => env.client.enqueue('throwing_key', {}), InvalidKeyError, 'invalid_key');
    expect(thrown.message).toMatch(/rateLimit\.key function of step "throwing_key" threw: no tenant/);
    await expectRejectedWritingNothing(env, () => env.client.enqueueMany('bad_key', [{ tenant: 'a' }, { tenant: 3 }]), InvalidKeyError, 'invalid_key');

    // Only that enqueue fails: the ones made at the same moment are written.
    const results = await Promise.allSettled([
      env.client.enqueue('throwing_key', { tenant: 'a' }),
      env.client.enqueue('throwing_key', {}),
      env.client.enqueue('throwing_key', { tenant: 'b' }),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(await countRows(env)).toEqual({ runs: 2, steps: 2 });
  });
});
