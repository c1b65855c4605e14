import { afterEach, expect, it } from '@jest/globals';
import { fork, type ChildProcess } from 'node:child_process';
import { createClient } from 'redis';
import { CrashRig } from './crash/crash-rig.js';
import {
  CREATE_DISPATCH_FAULT_TABLES,
  DF_CRASH,
  DF_FAIL,
  DF_FAIL_ATTEMPTS,
  DF_STEP,
  DispatchFaultSteps,
  type DfInput,
  type DfOutput,
} from './crash/dispatch-steps.js';
import { DISPATCH_WORKER_SCRIPT, WorkerFleet, type WorkerProcess } from './crash/worker-fleet.js';
import { describeWithRedis, startRedisServer, type RedisServer } from './support/redis.js';
import { sleep, waitFor } from './support/wait.js';

/**
 * Broker dispatch (SPEC §17) against the failures of seed 004, step 6 ("Check
 * every failure"), with real processes: worker processes
 * (test/crash/dispatch-worker.ts) that are SIGKILLed or frozen, a publisher
 * that dies between XADD and COMMIT (test/crash/outbox-crash.ts), and a
 * redis-server of each test's own that is killed, wiped and restarted. Every
 * test ends the seed's way: each job completed exactly once (its handler's
 * calls and effects are counted in df_invocations and df_effects) or failed
 * visibly, nothing left running or waiting, the outbox empty and no message
 * pending in any stream.
 */

const LEASE_TTL_MS = 1_000;
const POLL_MS: [number, number] = [100, 300];
const STREAM = 'cyclone:stream:default:0';
const OUTBOX_CRASH_SCRIPT = DISPATCH_WORKER_SCRIPT.replace(/dispatch-worker\.js$/, 'outbox-crash.js');

let rig: CrashRig | undefined;
let redis: RedisServer | undefined;
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await rig?.close();
  rig = undefined;
  await redis?.stop();
  redis = undefined;
});

interface SetUp {
  workers: number;
  slots: number;
  dispatch?: Record<string, unknown>;
  persistent?: boolean;
}

/** A Redis of the test's own, a fresh database, an enqueue-only client and `workers` dispatch worker processes. */
async function setUp({ workers, slots, dispatch = {}, persistent = false }: SetUp) {
  redis = await startRedisServer({ persistent });
  rig = await CrashRig.create({
    // A server notices a dead client within 100 ms even while the client's statement waits on a lock.
    tables: `${CREATE_DISPATCH_FAULT_TABLES}
      DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET client_connection_check_interval = 100', current_database()); END $$;`,
    providers: [DispatchFaultSteps],
    script: DISPATCH_WORKER_SCRIPT,
    fleet: { leaseTtlMs: LEASE_TTL_MS, pollMs: POLL_MS, slots, dispatch: { redis: { url: redis.url }, ...dispatch } },
    workers,
  });
  return { env: rig.env, pool: rig.pool, fleet: rig.fleet, redisUrl: redis.url };
}

async function query<T>(text: string, params: unknown[] = []): Promise<T[]> {
  return (await rig!.pool.query(text, params)).rows as T[];
}

/** A short-lived connection to the test's Redis. */
type Redis = ReturnType<typeof createRedis>;
const createRedis = (url: string) => createClient({ url, socket: { reconnectStrategy: false } });

async function withRedis<T>(fn: (client: Redis) => Promise<T>): Promise<T> {
  const client = createRedis(redis!.url);
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    client.destroy();
  }
}

/** Messages ever added to the queue's stream (XINFO STREAM entries-added), and those in it now. */
async function streamInfo(): Promise<{ added: number; length: number }> {
  return withRedis(async (client) => {
    if ((await client.exists(STREAM)) === 0) return { added: 0, length: 0 };
    const reply = (await client.sendCommand(['XINFO', 'STREAM', STREAM])) as unknown;
    const field = (name: string) =>
      Number(
        Array.isArray(reply)
          ? reply[reply.indexOf(name) + 1]
          : reply instanceof Map
            ? reply.get(name)
            : (reply as Record<string, unknown>)[name],
      );
    return { added: field('entries-added'), length: field('length') };
  });
}

/** Pending messages over every stream of Cyclone's. */
async function pendingMessages(): Promise<number> {
  return withRedis(async (client) => {
    let pending = 0;
    for (const key of await client.keys('cyclone:stream:*')) {
      pending += (await client.xPending(key, 'cyclone')).pending;
    }
    return pending;
  });
}

/** The runs' states, by run id. */
async function runStates(runIds: string[]): Promise<Map<string, string>> {
  const rows = await query<{ id: string; state: string }>('SELECT id, state FROM cyclone_runs WHERE id = ANY ($1::uuid[])', [runIds]);
  return new Map(rows.map((r) => [r.id, r.state]));
}

/** Waits until every run has finished, and returns their states. */
async function untilFinished(runIds: string[], timeoutMs = 20_000): Promise<Map<string, string>> {
  return waitFor(
    `${runIds.length} run(s) to finish`,
    async () => {
      const states = await runStates(runIds);
      return runIds.every((id) => ['completed', 'failed', 'cancelled'].includes(states.get(id) ?? '')) ? states : undefined;
    },
    timeoutMs,
    50,
  );
}

/** How many times each run's handler was called, and how many times it returned (its effect). */
async function counts(runIds: string[]): Promise<{ calls: Map<string, number>; effects: Map<string, number> }> {
  const calls = await query<{ run_id: string; n: number }>(
    'SELECT run_id, count(*)::int AS n FROM df_invocations WHERE run_id = ANY ($1::uuid[]) GROUP BY run_id',
    [runIds],
  );
  const effects = await query<{ run_id: string; n: number }>('SELECT run_id, n FROM df_effects WHERE run_id = ANY ($1::uuid[])', [runIds]);
  return { calls: new Map(calls.map((r) => [r.run_id, r.n])), effects: new Map(effects.map((r) => [r.run_id, r.n])) };
}

/** Every run completed, its handler called once and its effect applied once. */
async function expectEachRanOnce(runIds: string[]): Promise<void> {
  const states = await untilFinished(runIds);
  expect([...states.values()].filter((s) => s !== 'completed')).toEqual([]);
  const { calls, effects } = await counts(runIds);
  expect(runIds.filter((id) => calls.get(id) !== 1)).toEqual([]);
  expect(runIds.filter((id) => effects.get(id) !== 1)).toEqual([]);
}

/** The end of every test: nothing running or waiting, the outbox empty, no message pending in any stream. */
async function expectNothingLeft(timeoutMs = 15_000): Promise<void> {
  let last = {};
  try {
    await waitFor(
      'an empty outbox, no pending message and no unfinished step',
      async () => {
        const [left] = await query<{ outbox: number; unfinished: number; running: number }>(
          `SELECT (SELECT count(*)::int FROM cyclone_outbox) AS outbox,
                  (SELECT count(*)::int FROM cyclone_steps WHERE state NOT IN ('completed', 'discarded', 'cancelled')) AS unfinished,
                  (SELECT count(*)::int FROM cyclone_runs WHERE state = 'running') AS running`,
        );
        last = { ...left, pending: await pendingMessages() };
        return Object.values(last).every((n) => n === 0) ? true : undefined;
      },
      timeoutMs,
      100,
    );
  } catch (err) {
    const outbox = await query('SELECT step_id, attempts, due_at, next_attempt_at, created_at, now() AS now FROM cyclone_outbox LIMIT 5');
    const steps = await query('SELECT run_id, id, state, attempt, reclaims, lease_owner, lease_expiry, updated_at FROM cyclone_steps WHERE state NOT IN (\'completed\', \'discarded\', \'cancelled\') LIMIT 5');
    throw new Error(`${(err as Error).message}: ${JSON.stringify({ last, outbox, steps })}\n${rig!.fleet.tail(30)}`);
  }
}

/** The worker process whose handler was called for `runId` (the latest call). */
async function holderOf(fleet: WorkerFleet, runId: string, timeoutMs = 15_000): Promise<WorkerProcess> {
  const pid = await waitFor(
    `a handler call for run ${runId}`,
    async () => (await query<{ pid: number }>('SELECT pid FROM df_invocations WHERE run_id = $1 ORDER BY id DESC LIMIT 1', [runId]))[0]?.pid,
    timeoutMs,
  );
  const worker = fleet.processes.find((w) => w.pid === pid);
  if (!worker) throw new Error(`No worker process ${pid}`);
  return worker;
}

async function openGate(key: string): Promise<void> {
  await query('INSERT INTO df_gates (key) VALUES ($1) ON CONFLICT DO NOTHING', [key]);
}

async function stepOf(runId: string) {
  const [step] = await query<{
    id: string;
    state: string;
    attempt: number;
    reclaims: number;
    lease_owner: string | null;
    lease_generation: string;
    kind: string;
    node_type: string;
    error_kind: string | null;
    output: DfOutput | null;
  }>('SELECT id, state, attempt, reclaims, lease_owner, lease_generation, kind, node_type, error_kind, output FROM cyclone_steps WHERE run_id = $1', [
    runId,
  ]);
  return step;
}

describeWithRedis(
  'broker dispatch faults (seed 004, step 6)',
  () => {
    it('a client killed after its handler returned, its completion blocked mid-transaction: rolled back, the step taken over by another worker, the job completed once', async () => {
      const { env, pool, fleet } = await setUp({ workers: 2, slots: 1 });
      const runId = await env.client.enqueue(DF_STEP, { key: 'returned', gate: true } satisfies DfInput);
      const first = await holderOf(fleet, runId);

      // The run's lock held: the completion's transaction waits on it, after the handler returned.
      const blocker = await pool.connect();
      try {
        await blocker.query('BEGIN');
        await blocker.query('SELECT 1 FROM cyclone_runs WHERE id = $1 FOR UPDATE', [runId]);
        await openGate('returned');
        const backend = await waitFor('the completion waiting on the run lock', async () => {
          const rows = await query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%cyclone_complete_steps%'`,
          );
          return rows[0]?.pid;
        });
        expect((await counts([runId])).effects.get(runId)).toBe(1);
        await fleet.kill(first);
        // The server notices its client is gone and rolls the completion back.
        await waitFor('the dead client\'s backend to end', async () =>
          (await query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [backend])).length === 0 ? true : undefined,
        );
      } finally {
        await blocker.query('ROLLBACK');
        blocker.release();
      }
      expect((await stepOf(runId)).state).toBe('running');

      const output = await env.client.result<typeof DF_STEP>(runId, { timeout: 20_000 });
      expect((output as DfOutput).pid).not.toBe(first.pid);
      const step = await stepOf(runId);
      expect(step).toMatchObject({ state: 'completed', attempt: 1, reclaims: 1 });
      expect(step.output).toEqual(output);
      // Called twice and returned twice (at least once, by design); one outcome committed, the second's.
      const { calls, effects } = await counts([runId]);
      expect([calls.get(runId), effects.get(runId)]).toEqual([2, 2]);
      expect(Number(step.lease_generation)).toBe((output as DfOutput).token);
      await expectNothingLeft();
    });

    it('a worker killed mid-step with its messages unacknowledged: another worker process takes them over and each step completes once', async () => {
      const { env, fleet } = await setUp({ workers: 1, slots: 2 });
      const keys = ['mid-a', 'mid-b'];
      const runIds = await Promise.all(keys.map((key) => env.client.enqueue(DF_STEP, { key, gate: true } satisfies DfInput)));
      const victim = await holderOf(fleet, runIds[0]);
      expect((await holderOf(fleet, runIds[1])).pid).toBe(victim.pid);
      const survivor = rig!.spawn();
      await survivor.whenReady;
      await fleet.kill(victim);
      for (const key of keys) await openGate(key);

      const states = await untilFinished(runIds);
      expect([...states.values()]).toEqual(['completed', 'completed']);
      const { calls, effects } = await counts(runIds);
      for (const runId of runIds) {
        // The killed call never reached its effect; the survivor's did, once.
        expect([calls.get(runId), effects.get(runId)]).toEqual([2, 1]);
        const step = await stepOf(runId);
        expect(step).toMatchObject({ state: 'completed', attempt: 1, reclaims: 1, lease_owner: survivor.owner });
        expect(step.output!.pid).toBe(survivor.pid);
      }
      await expectNothingLeft();
    });

    it('a slow worker whose lease was taken over: its late outcome is ignored, one outcome applied', async () => {
      const { env, fleet } = await setUp({ workers: 2, slots: 1 });
      const runId = await env.client.enqueue(DF_STEP, { key: 'slow', gate: true } satisfies DfInput);
      const slow = await holderOf(fleet, runId);
      const other = fleet.processes.find((w) => w !== slow)!;
      process.kill(slow.pid, 'SIGSTOP');
      try {
        await openGate('slow');
        const output = (await env.client.result<typeof DF_STEP>(runId, { timeout: 20_000 })) as DfOutput;
        expect(output.pid).toBe(other.pid);
      } finally {
        process.kill(slow.pid, 'SIGCONT');
      }
      const done = await stepOf(runId);
      // The slow handler goes on and returns late (it does not heed its abort signal).
      await waitFor('the slow handler to return', async () => ((await counts([runId])).effects.get(runId) === 2 ? true : undefined));
      // The slow worker goes back to work: its late attempt has been settled by the time it completes new jobs.
      const more: string[] = [];
      await waitFor(
        'the slow worker to complete a new job',
        async () => {
          more.push(await env.client.enqueue(DF_STEP, { key: `after-${more.length}`, ms: 100 } satisfies DfInput));
          await untilFinished(more);
          const byIt = await query('SELECT 1 FROM df_effects WHERE run_id = ANY ($1::uuid[]) AND last_pid = $2', [more, slow.pid]);
          return byIt.length > 0 ? true : undefined;
        },
        20_000,
      );
      const after = await stepOf(runId);
      expect(after).toEqual(done);
      expect(after.output!.pid).toBe(other.pid);
      // One ended attempt on record, the slow worker's, taken over; the step's own row is the completed one.
      const ended = await query<{ outcome: string; worker: string }>('SELECT outcome, worker FROM cyclone_attempts WHERE run_id = $1', [runId]);
      expect(ended).toEqual([{ outcome: 'reclaimed', worker: slow.owner }]);
      await expectEachRanOnce(more);
      await expectNothingLeft();
    });

    it('duplicate messages and late reports are dropped: the job runs once', async () => {
      const { env, fleet } = await setUp({ workers: 1, slots: 2 });
      const runId = await env.client.enqueue(DF_STEP, { key: 'dup', gate: true } satisfies DfInput);
      const holder = await holderOf(fleet, runId);
      const step = await stepOf(runId);
      const copy = { step: step.id, run: runId, kind: step.kind, type: step.node_type };
      // Two copies while the step runs: both acknowledged and dropped, the step still running.
      const gone = async (ids: string[]) =>
        withRedis(async (client) => {
          const inStream = ((await client.xRange(STREAM, '-', '+')) ?? []).map((m) => m?.id);
          return ids.every((id) => !inStream.includes(id)) && (await pendingMessages()) <= 1 ? true : undefined;
        });
      const copies = await withRedis(async (client) => [await client.xAdd(STREAM, '*', copy), await client.xAdd(STREAM, '*', copy)]);
      await waitFor('the copies dropped', () => gone(copies));
      expect((await stepOf(runId)).state).toBe('running');
      expect((await counts([runId])).calls.get(runId)).toBe(1);
      await openGate('dup');
      const output = (await env.client.result<typeof DF_STEP>(runId, { timeout: 20_000 })) as DfOutput;
      expect(output.pid).toBe(holder.pid);
      // A copy after it completed: dropped too.
      const lateCopy = await withRedis((client) => client.xAdd(STREAM, '*', copy));
      await waitFor('the late copy dropped', () => gone([lateCopy]));
      // Late and duplicate reports of the attempt that completed: a completion and a failure, both refused.
      const done = await stepOf(runId);
      const late = await query('SELECT * FROM cyclone_complete_steps($1::uuid[], $2::bigint[], $3, $4::bigint[], $5::jsonb[])', [
        [runId],
        [step.id],
        holder.owner,
        [done.lease_generation],
        [JSON.stringify({ late: true })],
      ]);
      expect(late).toEqual([]);
      const [{ state }] = await query<{ state: string | null }>(
        "SELECT cyclone_fail_step($1::uuid, $2::bigint, $3, $4::bigint, 'a late failure', 'error', 0) AS state",
        [runId, step.id, holder.owner, done.lease_generation],
      );
      expect(state).toBeNull();
      expect(await stepOf(runId)).toEqual(done);
      await expectEachRanOnce([runId]);
      await expectNothingLeft();
    });

    it('a publisher killed between XADD and COMMIT: its rows are published again and the duplicates dropped, each job runs once', async () => {
      const { env, pool, fleet } = await setUp({ workers: 2, slots: 2 });
      // Due in a few seconds, longer than the crashing publisher takes to start on a busy machine:
      // it takes the rows before any worker's publisher may, and holds them.
      const runIds = await Promise.all(
        Array.from({ length: 5 }, (_, i) => env.client.enqueue(DF_STEP, { key: `pub-${i}` } satisfies DfInput, { processIn: '6s' })),
      );
      const publisher = fork(OUTBOX_CRASH_SCRIPT, [], {
        env: { ...process.env, CRASH_DATABASE_URL: rig!.database.url, CRASH_REDIS_URL: redis!.url },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      children.push(publisher);
      const said = (type: string) =>
        new Promise<number>((resolve, reject) => {
          publisher.on('message', (msg: { type?: string; count?: number }) => {
            if (msg?.type === type) resolve(msg.count!);
          });
          publisher.once('exit', () => reject(new Error(`the crashing publisher exited before it said "${type}"`)));
        });
      const locked = said('locked');
      const published = said('published');
      expect(await locked).toBe(5);
      expect(await published).toBe(5);
      // Its messages reached the workers: the steps ran from them, the outbox rows still held.
      const states = await untilFinished(runIds);
      expect([...states.values()].every((s) => s === 'completed')).toBe(true);
      expect((await pool.query('SELECT count(*)::int AS n FROM cyclone_outbox')).rows[0].n).toBe(5);

      publisher.kill('SIGKILL');
      await waitFor('the rows published again', async () => {
        const info = await streamInfo();
        return info.added === 10 && info.length === 0 ? true : undefined;
      });
      await expectEachRanOnce(runIds);
      expect(fleet.live()).toHaveLength(2);
      await expectNothingLeft();
    });

    it('a stream deleted from Redis: its steps are dispatched again by the lost-dispatch sweep after lostDispatchAfter', async () => {
      const { env, fleet } = await setUp({ workers: 1, slots: 1, dispatch: { lostDispatchAfter: '2s', whenRedisDown: 'wait' } });
      // One step holds the only slot, so the others' messages wait in the stream.
      const holding = await env.client.enqueue(DF_STEP, { key: 'holding', gate: true } satisfies DfInput);
      await holderOf(fleet, holding);
      const runIds = await Promise.all(Array.from({ length: 4 }, (_, i) => env.client.enqueue(DF_STEP, { key: `lost-${i}` } satisfies DfInput)));
      await waitFor('every message in the stream', async () => ((await streamInfo()).length === 5 ? true : undefined));
      const mark = fleet.mark();
      await withRedis((client) => client.del(STREAM));
      const deletedAt = Date.now();
      await openGate('holding');

      await expectEachRanOnce([holding, ...runIds]);
      const [{ soonest }] = await query<{ soonest: number }>(
        `SELECT min(extract(epoch FROM f.at - r.created_at) * 1000)::float8 AS soonest
           FROM cyclone_runs r JOIN df_effects f ON f.run_id = r.id WHERE r.id = ANY ($1::uuid[])`,
        [runIds],
      );
      // Not before they had been available for lostDispatchAfter.
      expect({ soonest, log: soonest >= 2_000 ? '' : fleet.tail(20) }).toEqual({ soonest: expect.any(Number), log: '' });
      expect(soonest).toBeGreaterThanOrEqual(2_000);
      expect(Date.now() - deletedAt).toBeLessThan(15_000);
      expect(fleet.since(mark).join('\n')).toMatch(/re-dispatched 4 step\(s\) available for over 2000 ms/);
      await expectNothingLeft();
    });

    it('Redis restarted without persistence: every available step is dispatched again at once (the epoch), long before lostDispatchAfter', async () => {
      const { env, fleet } = await setUp({ workers: 1, slots: 1, dispatch: { lostDispatchAfter: '10m', whenRedisDown: 'wait' } });
      const holding = await env.client.enqueue(DF_STEP, { key: 'holding', gate: true } satisfies DfInput);
      await holderOf(fleet, holding);
      const runIds = await Promise.all(Array.from({ length: 4 }, (_, i) => env.client.enqueue(DF_STEP, { key: `wiped-${i}` } satisfies DfInput)));
      await waitFor('every message in the stream', async () => ((await streamInfo()).length === 5 ? true : undefined));
      const mark = fleet.mark();
      await redis!.restart();
      const restartedAt = Date.now();
      await openGate('holding');

      await expectEachRanOnce([holding, ...runIds]);
      expect(Date.now() - restartedAt).toBeLessThan(15_000);
      expect(fleet.since(mark).join('\n')).toMatch(/lost its data; re-dispatched 4 available step\(s\)/);
      await expectNothingLeft();
    });

    it(
      "Redis down for 20 s under a steady producer: 'claim' keeps completing work, 'wait' resumes after; nothing lost",
      async () => {
        const { env, fleet, redisUrl } = await setUp({ workers: 0, slots: 4, persistent: true });
        const claiming = fleet.spawn({ CRASH_DISPATCH: JSON.stringify({ redis: { url: redisUrl }, whenRedisDown: 'claim' }) });
        const waiting = fleet.spawn({ CRASH_DISPATCH: JSON.stringify({ redis: { url: redisUrl }, whenRedisDown: 'wait' }) });
        await Promise.all([claiming.whenReady, waiting.whenReady]);

        const runIds: string[] = [];
        let producing = true;
        const producer = (async () => {
          for (let i = 0; producing; i++) {
            runIds.push(await env.client.enqueue(DF_STEP, { key: `steady-${i}` } satisfies DfInput));
            await sleep(50);
          }
        })();
        const effectsBy = async (pid: number, from: number, to: number) =>
          (
            await query<{ n: number }>(
              'SELECT count(*)::int AS n FROM df_effects WHERE last_pid = $1 AND at > to_timestamp($2 / 1000.0) AND at < to_timestamp($3 / 1000.0)',
              [pid, from, to],
            )
          )[0].n;
        try {
          await waitFor('both workers completing jobs', async () =>
            (await effectsBy(claiming.pid, 0, Date.now())) > 0 && (await effectsBy(waiting.pid, 0, Date.now())) > 0 ? true : undefined,
          );
          await redis!.kill();
          const downAt = Date.now();
          await waitFor('the claiming worker completing jobs with Redis down', async () =>
            (await effectsBy(claiming.pid, downAt + 1_000, Date.now())) > 0 ? true : undefined,
          );
          // The outage lasts 20 s; the producer goes on meanwhile.
          await sleep(20_000 - (Date.now() - downAt));
          const upAt = Date.now();
          // Work went on through the outage, to its last seconds, and only on the claiming worker.
          expect(await effectsBy(claiming.pid, upAt - 5_000, upAt)).toBeGreaterThan(0);
          expect(await effectsBy(waiting.pid, downAt + 1_000, upAt)).toBe(0);
          await redis!.restart({ keepData: true });
          await waitFor(
            'the waiting worker completing jobs again',
            async () => ((await effectsBy(waiting.pid, upAt, Date.now())) > 0 ? true : undefined),
            20_000,
          );
        } finally {
          producing = false;
          await producer;
        }
        expect(runIds.length).toBeGreaterThan(200);
        await expectEachRanOnce(runIds);
        expect(fleet.live()).toHaveLength(2);
        // Rows deferred while Redis was down go out once their backoff (at most 30 s) is over, if not sooner.
        await expectNothingLeft(40_000);
      },
      120_000,
    );

    it("a message that keeps crashing workers: past maxDeliveries its step fails with error_kind 'max_deliveries' and the run fails visibly", async () => {
      const { env, fleet } = await setUp({ workers: 2, slots: 1, dispatch: { maxDeliveries: 2 } });
      // Every worker the step kills is replaced, as an orchestrator would.
      let respawns = 0;
      const replace = (worker: WorkerProcess) =>
        void worker.whenExited.then(() => {
          if (rig && respawns < 6) {
            respawns += 1;
            replace(rig.spawn());
          }
        });
      for (const worker of fleet.processes) replace(worker);
      const runId = await env.client.enqueue(DF_CRASH, { key: 'poison' } satisfies DfInput);
      const states = await untilFinished([runId], 30_000);
      expect(states.get(runId)).toBe('failed');
      const step = await stepOf(runId);
      expect(step).toMatchObject({ state: 'discarded', error_kind: 'max_deliveries', attempt: 1 });
      // Delivered twice, each delivery killing its worker; the third was not run but failed the step.
      const { calls } = await counts([runId]);
      // At least maxDeliveries calls, each of which killed its worker, and no more workers killed than calls.
      expect(calls.get(runId)).toBeGreaterThanOrEqual(2);
      expect(fleet.processes.filter((w) => w.exited && w.child.signalCode === 'SIGKILL')).toHaveLength(calls.get(runId)!);
      const run = await env.client.getRun(runId);
      expect(run.state).toBe('failed');
      await expectNothingLeft();
    });

    it('a step failing until its attempts run out: the run fails visibly', async () => {
      const { env } = await setUp({ workers: 1, slots: 2 });
      const runId = await env.client.enqueue(DF_FAIL, { key: 'failing' } satisfies DfInput);
      const states = await untilFinished([runId]);
      expect(states.get(runId)).toBe('failed');
      const attempts = await query<{ attempt: number }>('SELECT attempt FROM df_invocations WHERE run_id = $1 ORDER BY id', [runId]);
      expect(attempts.map((a) => a.attempt)).toEqual(Array.from({ length: DF_FAIL_ATTEMPTS }, (_, i) => i + 1));
      expect(await stepOf(runId)).toMatchObject({ state: 'discarded', error_kind: 'error', attempt: DF_FAIL_ATTEMPTS });
      await expect(env.client.result(runId, { timeout: 1_000 })).rejects.toThrow(/fails/);
      // Each retry went out through the outbox and the stream.
      expect((await streamInfo()).added).toBe(DF_FAIL_ATTEMPTS);
      await expectNothingLeft();
    });
  },
  { ownServer: true },
);
