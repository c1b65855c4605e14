import { describe, it, expect, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import {
  InvalidStateError,
  RunCancelledError,
  Step,
  defineWorkflow,
  type StepContext,
  type StepInfo,
} from 'cyclone-nestjs';
import { TimerSweeper, type TimerOutcome } from '../libs/cyclone/src/maintenance/timer.sweeper.js';
import type { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { expectCycloneError } from './support/e2e-helpers.js';
import { sql } from './support/sql.js';
import { HandlerProbe, POLLING_OFF, attemptEndOf, firstPollTick, testEnvs } from './support/handler-probe.js';
import { sleep, waitFor } from './support/wait.js';

const probe = new HandlerProbe();
/** Every call of the `count` step: which run and node it ran for. */
const counted: { runId: string; nodeId: string }[] = [];

@Injectable()
class RaceSteps {
  /** Held until the test releases it; returns what it is released with. */
  @Step('held')
  async held(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }

  /** Records that it ran and returns at once. */
  @Step('count')
  async count(_input: unknown, ctx: StepContext) {
    counted.push({ runId: ctx.runId, nodeId: ctx.nodeId });
    return { node: ctx.nodeId };
  }
}

const Nap = defineWorkflow<{ i: number }>('race-nap').sleep('nap', 150).step('after', 'count', { after: ['nap'] });

const TimedApproval = defineWorkflow<{ i: number }>('race-approval')
  .waitForSignal('approval', { timeout: 300 })
  .step('after', 'count', { after: ['approval'] });

const HeldFlow = defineWorkflow<{ i: number }>('race-held').step('first', 'held').step('second', 'count', { after: ['first'] });

const HeldLast = defineWorkflow<{ i: number }>('race-held-last').step('prep', 'count').step('last', 'held', { after: ['prep'] });

const workflows = [Nap, TimedApproval, HeldFlow, HeldLast];
const fastPoll: [number, number] = [10, 30];
/** Runs per race: all raced at once, so a wrong interleaving has many chances to show. */
const RUNS = 30;

const { createEnv, replicaOf } = testEnvs([RaceSteps], probe);

const indexes = () => Array.from({ length: RUNS }, (_, i) => i);

/** How many times the `count` step ran for this node of this run. */
const countedRuns = (runId: string, nodeId: string) => counted.filter((c) => c.runId === runId && c.nodeId === nodeId).length;

/** The run's steps by node id. */
async function stepsOf(env: CycloneTestEnv, runId: string): Promise<Record<string, StepInfo>> {
  const steps = await env.client.listSteps(runId);
  return Object.fromEntries(steps.map((s) => [s.nodeId, s]));
}

/** What a node looks like to a user: its state, output and error kind. */
const outcomeOf = (step: StepInfo) => ({ state: step.state, output: step.output, errorKind: step.errorKind });

/** Waits until every one of the runs' `nodeId` nodes is in `state`. */
function untilAllNodes(env: CycloneTestEnv, runIds: string[], nodeId: string, state: string, what: string) {
  return waitFor(
    what,
    async () => {
      const [{ n }] = await sql<{ n: number }>(
        env,
        'SELECT count(*)::int AS n FROM cyclone_steps WHERE run_id = ANY ($1) AND node_id = $2 AND state = $3',
        [runIds, nodeId, state],
      );
      return n === runIds.length ? n : undefined;
    },
    15_000,
  );
}

/** Every outcome every pass of the spied sweepers returned: loop ticks and direct calls alike. */
async function outcomesOf(spies: { mock: { results: { value: unknown }[] } }[]): Promise<TimerOutcome[]> {
  const passes = spies.flatMap((spy) => spy.mock.results.map((r) => r.value as Promise<TimerOutcome[]>));
  return (await Promise.all(passes)).flat();
}

/** Calls `fn` after `ms` milliseconds (at once, in this tick, for 0). */
function after<T>(ms: number, fn: () => T | Promise<T>): Promise<T> {
  if (ms === 0) return Promise.resolve(fn());
  return sleep(ms).then(fn);
}

/**
 * Two replicas and RUNS runs of `workflow`, started on each in turn, each held
 * in its first handler call: the starting point of the completion races.
 */
async function heldRunsOnTwoReplicas(workflow: typeof HeldFlow) {
  const base = await createEnv({ workflows, pollInterval: fastPoll, workers: 16 });
  const envs = [base, await replicaOf(base, { workflows, pollInterval: fastPoll, workers: 16 })];
  const runIds = await Promise.all(indexes().map((i) => envs[i % 2].client.start(workflow, { i })));
  const calls = await Promise.all(runIds.map((runId) => probe.call(runId, 0, 15_000)));
  return { base, envs, runIds, calls };
}

/**
 * Releases run `i`'s held handler and calls `act` at nearly the same moment:
 * even runs release first and act 0-58 ms later, odd runs act first, so the
 * handler's completion lands before, during and after the other call.
 */
async function collide<T>(i: number, release: () => void, act: () => Promise<T>): Promise<T> {
  const offset = 2 * i;
  const [result] =
    i % 2 === 0 ? await Promise.all([after(offset, act), after(0, release)]) : await Promise.all([after(0, act), after(offset, release)]);
  return result;
}

describe('workflow races: each has exactly one outcome', () => {
  it('replicas firing the same due timers at once: each sleep fires exactly once and its successor runs once', async () => {
    const base = await createEnv({ workflows, pollInterval: fastPoll, workers: 4 });
    const envs = [base, await replicaOf(base, { workflows, pollInterval: fastPoll, workers: 4 })];
    envs.push(await replicaOf(base, { workflows, pollInterval: fastPoll, workers: 4 }));
    // Every pass of every client is recorded: its timer loop's and the direct calls below.
    const spies = envs.map((env) => jest.spyOn(env.app.get(TimerSweeper), 'fire'));
    // A pass begun before its spy would fire unseen: wait until each loop has begun one since.
    await Promise.all(envs.map((env) => env.waitForPasses('cyclone:timers')));

    const runIds = await Promise.all(indexes().map((i) => envs[i % envs.length].client.start(Nap, { i })));
    // Beside the loops (every 10-30 ms on each client), two callers per client fire
    // back to back until every run is done: several passes meet on each due timer.
    let done = false;
    const firers = envs.flatMap((env) =>
      [0, 1].map(async () => {
        const sweeper = env.app.get(TimerSweeper);
        while (!done) await sweeper.fire();
      }),
    );
    try {
      await waitFor(
        'every run to complete',
        async () => {
          const [{ n }] = await sql<{ n: number }>(
            base,
            "SELECT count(*)::int AS n FROM cyclone_runs WHERE id = ANY ($1) AND state = 'completed'",
            [runIds],
          );
          return n === RUNS ? n : undefined;
        },
        15_000,
      );
    } finally {
      done = true;
      await Promise.all(firers);
    }
    // Further passes find nothing left to fire.
    await Promise.all(envs.map((env) => env.waitForPasses('cyclone:timers')));
    expect((await Promise.all(envs.map((env) => env.app.get(TimerSweeper).fire()))).flat()).toEqual([]);

    const outcomes = await outcomesOf(spies);
    // Every client took part, and together they fired each timer once.
    expect(spies.every((spy) => spy.mock.calls.length > 1)).toBe(true);
    expect(outcomes.filter((o) => o === 'slept')).toHaveLength(RUNS);
    expect(outcomes).toHaveLength(RUNS);
    for (const runId of runIds) {
      const steps = await stepsOf(base, runId);
      expect(outcomeOf(steps.nap)).toEqual({ state: 'completed', output: null, errorKind: null });
      expect(outcomeOf(steps.after)).toEqual({ state: 'completed', output: { node: 'after' }, errorKind: null });
      expect(countedRuns(runId, 'after')).toBe(1);
      expect((await base.client.getRun(runId)).state).toBe('completed');
    }
  });

  it('a signal racing its timeout: either it is delivered and the run completes, or it is refused and the wait fails with signal_timeout', async () => {
    // Polling off: timers fire only in the calls below, so every firing is counted.
    const base = await createEnv({ workflows, pollInterval: POLLING_OFF, workers: 4 });
    const envs = [
      base,
      await replicaOf(base, { workflows, pollInterval: POLLING_OFF, workers: 4 }),
      await replicaOf(base, { workflows, pollInterval: POLLING_OFF, runWorkers: false }),
    ];
    await Promise.all(envs.map(firstPollTick));
    const spies = envs.map((env) => jest.spyOn(env.app.get(TimerSweeper), 'fire'));

    const runIds = await Promise.all(indexes().map((i) => base.client.start(TimedApproval, { i })));
    await untilAllNodes(base, runIds, 'approval', 'waiting_signal', 'every signal wait');
    // Wait (on the database clock) until every wait's timeout has passed, then let
    // everything meet: a signal to each run, each run's own timer fired by the test
    // kit, and sweeper passes on every client, all at once.
    await waitFor(
      'every timeout to be due',
      async () => {
        const [{ n }] = await sql<{ n: number }>(
          base,
          "SELECT count(*)::int AS n FROM cyclone_steps WHERE run_id = ANY ($1) AND node_id = 'approval' AND wake_at <= now()",
          [runIds],
        );
        return n === RUNS ? n : undefined;
      },
      10_000,
    );

    const fireTimer = (env: CycloneTestEnv, runId: string) =>
      env.fireTimer(runId, 'approval').catch((err: unknown) => {
        // Someone else settled the node first: the test kit finds nothing to fire.
        if (err instanceof InvalidStateError) return null;
        throw err;
      });
    const signals: Promise<boolean>[] = [];
    const kitFires: Promise<TimerOutcome | null>[] = [];
    const passes: Promise<TimerOutcome[]>[] = [];
    // One pair at a time, a few milliseconds apart, so each pair meets in the
    // database rather than queueing behind the others; sweeper passes on every
    // client cross them on the way.
    for (const [i, runId] of runIds.entries()) {
      const signal = () => envs[i % envs.length].client.signal(runId, 'approval', { n: i });
      const fire = () => fireTimer(envs[(i + 1) % envs.length], runId);
      if (i % 2 === 0) {
        signals.push(signal());
        kitFires.push(fire());
      } else {
        kitFires.push(fire());
        signals.push(signal());
      }
      if (i % 10 === 5) for (const env of envs) passes.push(env.app.get(TimerSweeper).fire());
      await sleep(2);
    }
    const settled = await Promise.allSettled(signals);
    await Promise.all([...kitFires, ...passes]);

    const delivered: number[] = [];
    const refused: number[] = [];
    for (const [i, result] of settled.entries()) {
      if (result.status === 'fulfilled') {
        // Never "kept for later": the node was waiting.
        expect(result.value).toBe(true);
        delivered.push(i);
      } else {
        await expectCycloneError(signals[i], InvalidStateError, 'invalid_state');
        refused.push(i);
      }
    }
    expect(delivered.length + refused.length).toBe(RUNS);

    // Every timeout that fired refused exactly one signal; nothing else fired.
    const timerOutcomes = [...(await outcomesOf(spies)), ...(await Promise.all(kitFires)).filter((o) => o !== null)];
    expect(timerOutcomes.filter((o) => o === 'signal_timeout')).toHaveLength(refused.length);
    expect(timerOutcomes).toHaveLength(refused.length);

    for (const i of delivered) {
      const runId = runIds[i];
      expect((await base.runUntilComplete(runId, { timeout: 10_000 })).state).toBe('completed');
      const steps = await stepsOf(base, runId);
      expect(outcomeOf(steps.approval)).toEqual({ state: 'completed', output: { n: i }, errorKind: null });
      expect(outcomeOf(steps.after)).toEqual({ state: 'completed', output: { node: 'after' }, errorKind: null });
      expect(await base.client.output(runId, 'approval')).toEqual({ n: i });
      expect(countedRuns(runId, 'after')).toBe(1);
    }
    for (const i of refused) {
      const runId = runIds[i];
      expect((await base.runUntilComplete(runId, { timeout: 10_000 })).state).toBe('failed');
      const steps = await stepsOf(base, runId);
      expect(outcomeOf(steps.approval)).toEqual({ state: 'discarded', output: null, errorKind: 'signal_timeout' });
      expect(outcomeOf(steps.after)).toEqual({ state: 'pending', output: null, errorKind: null });
      await expectCycloneError(base.client.output(runId, 'approval'), InvalidStateError, 'invalid_state');
    }
    // Settled for good: a pass of every client's timers (their loops are off) finds nothing to fire,
    // and no successor of a failed wait runs.
    expect((await Promise.all(envs.map((env) => env.app.get(TimerSweeper).fire()))).flat()).toEqual([]);
    for (const i of refused) expect(countedRuns(runIds[i], 'after')).toBe(0);
  });

  it('a completion racing a cancel: the node completed first (successor cancelled) or was cancelled (result dropped, successor never ran); nothing moves afterwards', async () => {
    const { base, envs, runIds, calls } = await heldRunsOnTwoReplicas(HeldFlow);

    // Release each held handler and cancel its run at (nearly) the same moment, in
    // either order; the steps as they stand the moment cancel returns are kept.
    const raced = await Promise.all(
      runIds.map(async (runId, i) => {
        const client = envs[(i + 1) % 2].client;
        const cancelled = await collide(i, () => calls[i].release({ first: i }), () => client.cancel(runId));
        return { cancelled, atCancel: await stepsOf(base, runId) };
      }),
    );
    // Every handler has returned, and its result has landed (or been dropped); the workers have looked again since.
    await Promise.all(calls.map((call) => attemptEndOf(envs, call)));
    await Promise.all(envs.map((env) => env.waitForPasses('cyclone:claim', 2)));

    for (const [i, { cancelled, atCancel }] of raced.entries()) {
      const runId = runIds[i];
      const run = await base.client.getRun(runId);
      const steps = await stepsOf(base, runId);
      // The held handler ran once, and nothing was retried.
      expect(probe.of(runId)).toHaveLength(1);
      expect(countedRuns(runId, 'second')).toBeLessThanOrEqual(1);
      if (cancelled) {
        expect(run.state).toBe('cancelled');
        // Nothing moved after cancel returned: no late completion, no successor released.
        expect(Object.values(steps).map(outcomeOf)).toEqual(Object.values(atCancel).map(outcomeOf));
        expect(outcomeOf(steps.second)).toEqual({ state: 'cancelled', output: null, errorKind: null });
        if (steps.first.state === 'completed') {
          // The completion won: its output is recorded, the cancel stopped what came after.
          expect(steps.first.output).toEqual({ first: i });
        } else {
          // The cancel won: the result was dropped, and the successor never ran.
          expect(outcomeOf(steps.first)).toEqual({ state: 'cancelled', output: null, errorKind: null });
          expect(countedRuns(runId, 'second')).toBe(0);
        }
        await expectCycloneError(base.client.result(runId, { timeout: 1_000 }), RunCancelledError, 'run_cancelled');
      } else {
        // Cancel came after the whole run had finished.
        expect(run.state).toBe('completed');
        expect(outcomeOf(steps.first)).toEqual({ state: 'completed', output: { first: i }, errorKind: null });
        expect(outcomeOf(steps.second)).toEqual({ state: 'completed', output: { node: 'second' }, errorKind: null });
        expect(countedRuns(runId, 'second')).toBe(1);
      }
    }
  });

  it('the last node completing racing a cancel: either cancel returns false and the run completed, or true and the run is cancelled with the result dropped', async () => {
    const { base, envs, runIds, calls } = await heldRunsOnTwoReplicas(HeldLast);

    const raced = await Promise.all(
      runIds.map(async (runId, i) => {
        const client = envs[(i + 1) % 2].client;
        return collide(i, () => calls[i].release({ last: i }), () => client.cancel(runId));
      }),
    );
    await Promise.all(calls.map((call) => attemptEndOf(envs, call)));
    await Promise.all(envs.map((env) => env.waitForPasses('cyclone:claim', 2)));

    for (const [i, cancelled] of raced.entries()) {
      const runId = runIds[i];
      const steps = await stepsOf(base, runId);
      expect(outcomeOf(steps.prep)).toEqual({ state: 'completed', output: { node: 'prep' }, errorKind: null });
      expect(probe.of(runId)).toHaveLength(1);
      if (cancelled) {
        // The cancel won: the handler's result was dropped.
        expect((await base.client.getRun(runId)).state).toBe('cancelled');
        expect(outcomeOf(steps.last)).toEqual({ state: 'cancelled', output: null, errorKind: null });
        await expectCycloneError(base.client.result(runId, { timeout: 1_000 }), RunCancelledError, 'run_cancelled');
      } else {
        // The completion won: the run completed with the node's output, and the cancel changed nothing.
        expect((await base.client.getRun(runId)).state).toBe('completed');
        expect(outcomeOf(steps.last)).toEqual({ state: 'completed', output: { last: i }, errorKind: null });
        await expect(base.client.result(runId, { timeout: 1_000 })).resolves.toEqual({ last: { last: i } });
      }
    }
  });

  it('a pause racing a completion: the successor never starts while the run is paused, and after resume every node has run once', async () => {
    const { base, envs, runIds, calls } = await heldRunsOnTwoReplicas(HeldFlow);

    // Release each held handler and pause its run at (nearly) the same moment, in
    // either order. A successor already claimed when pause returns may finish; one
    // not claimed by then must wait for resume.
    const raced = await Promise.all(
      runIds.map(async (runId, i) => {
        const client = envs[(i + 1) % 2].client;
        const pause = () =>
          client.pause(runId).catch(async (err: unknown) => {
            // Only if the whole run finished before the pause arrived.
            expect(err).toBeInstanceOf(InvalidStateError);
            expect((await client.getRun(runId)).state).toBe('completed');
            return null;
          });
        const paused = await collide(i, () => calls[i].release({ first: i }), pause);
        return { paused, secondAtPause: (await stepsOf(base, runId)).second.state };
      }),
    );
    await Promise.all(calls.map((call) => attemptEndOf(envs, call)));
    // Any wrongly released successor would be claimed by now: every worker has looked, several times.
    await Promise.all(envs.map((env) => env.waitForPasses('cyclone:claim', 3)));

    const held: string[] = [];
    for (const [i, { paused, secondAtPause }] of raced.entries()) {
      const runId = runIds[i];
      const steps = await stepsOf(base, runId);
      // The running step finished whatever the order.
      expect(outcomeOf(steps.first)).toEqual({ state: 'completed', output: { first: i }, errorKind: null });
      if (paused === null || secondAtPause === 'running' || secondAtPause === 'completed') {
        // The successor was claimed before the pause: it finishes, and so does the run.
        expect((await base.runUntilComplete(runId)).state).toBe('completed');
        expect(countedRuns(runId, 'second')).toBe(1);
        expect(outcomeOf((await stepsOf(base, runId)).second)).toEqual({ state: 'completed', output: { node: 'second' }, errorKind: null });
      } else {
        expect(paused).toBe(true);
        expect(secondAtPause).toBe('paused');
        // Not claimed before the pause: it has not started since.
        expect(countedRuns(runId, 'second')).toBe(0);
        expect(steps.second.state).toBe('paused');
        expect((await base.client.getRun(runId)).state).toBe('paused');
        held.push(runId);
      }
    }

    expect(await Promise.all(held.map((runId, i) => envs[i % 2].client.resume(runId)))).toEqual(held.map(() => true));
    for (const [i, runId] of runIds.entries()) {
      await expect(base.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ second: { node: 'second' } });
      const steps = await stepsOf(base, runId);
      expect(outcomeOf(steps.first)).toEqual({ state: 'completed', output: { first: i }, errorKind: null });
      expect(probe.of(runId)).toHaveLength(1);
      expect(countedRuns(runId, 'second')).toBe(1);
    }
  });
});
