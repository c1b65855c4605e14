import { describe, it, expect } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import {
  InvalidStateError,
  PermanentError,
  RunFailedError,
  RunNotFoundError,
  Snooze,
  Step,
  UnknownSignalError,
  defineWorkflow,
  type StepContext,
} from 'cyclone-nestjs';
import type { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { expectCycloneError, untilDatabaseTime } from './support/e2e-helpers.js';
import { HandlerProbe, POLLING_OFF, testEnvs } from './support/handler-probe.js';
import { sql } from './support/sql.js';
import { stateOf, untilStates } from './support/node-states.js';

const probe = new HandlerProbe();
/** Every handler call, in order: node id and what it saw. */
const seen: { nodeId: string; input: unknown; upstream: Record<string, unknown> }[] = [];
/** Node ids whose handler throws a PermanentError until removed. */
const failing = new Set<string>();

@Injectable()
class FlowSteps {
  /** Returns its node id and the sum of its upstreams' `n` plus one. */
  @Step('add')
  async add(input: { base: number }, ctx: StepContext) {
    const upstream: Record<string, unknown> = {};
    for (const id of ['a', 'b', 'c', 'approval', 'nap']) {
      try {
        upstream[id] = ctx.upstream(id);
      } catch {
        // not an upstream of this node
      }
    }
    seen.push({ nodeId: ctx.nodeId, input, upstream });
    if (failing.has(ctx.nodeId)) throw new PermanentError(`${ctx.nodeId} refuses`);
    const sum = Object.values(upstream).reduce<number>((n, u) => n + ((u as { n?: number } | null)?.n ?? 0), 0);
    return { node: ctx.nodeId, n: sum + input.base };
  }

  @Step('held')
  async held(_input: unknown, ctx: StepContext) {
    return probe.hold(ctx);
  }
}

const Diamond = defineWorkflow<{ base: number }>('diamond')
  .step('a', 'add')
  .step('b', 'add', { after: ['a'] })
  .step('c', 'add', { after: ['a'] })
  .step('d', 'add', { after: ['b', 'c'] });

const Approval = defineWorkflow<{ base: number }>('approval')
  .step('a', 'add')
  .waitForSignal('approval', { after: ['a'] })
  .step('d', 'add', { after: ['approval'] });

const TimedApproval = defineWorkflow<{ base: number }>('timed-approval')
  .waitForSignal('approval', { timeout: 300 })
  .step('d', 'add', { after: ['approval'] });

const LenientApproval = defineWorkflow<{ base: number }>('lenient-approval')
  .waitForSignal('approval', { timeout: 300, onTimeout: 'continue' })
  .step('d', 'add', { after: ['approval'] });

const Nap = defineWorkflow<{ base: number }>('nap').step('a', 'add').sleep('nap', 400, { after: ['a'] }).step('d', 'add', { after: ['nap'] });

const Held = defineWorkflow<{ base: number }>('held').step('first', 'held').step('second', 'add', { after: ['first'] });

const { createEnv, replicaOf } = testEnvs([FlowSteps], probe);

const workflows = [Diamond, Approval, TimedApproval, LenientApproval, Nap, Held];
const fastPoll: [number, number] = [20, 50];

describe('workflows', () => {
  it('runs a diamond: roots at once, the join only after both branches, every node gets the input and its upstream outputs', async () => {
    seen.length = 0;
    const env = await createEnv({ workflows, pollInterval: fastPoll });
    const runId = await env.client.start(Diamond, { base: 1 });

    const result = await env.client.result(runId, { timeout: 10_000 });
    // a = 1; b = c = 1 + 1; d = 2 + 2 + 1; result() of a workflow: its sink nodes' outputs.
    expect(result).toEqual({ d: { node: 'd', n: 5 } });
    expect(await env.client.output(runId, 'b')).toEqual({ node: 'b', n: 2 });
    expect(seen.map((s) => s.nodeId).sort()).toEqual(['a', 'b', 'c', 'd']);
    expect(seen.every((s) => (s.input as { base: number }).base === 1)).toBe(true);
    const d = seen.find((s) => s.nodeId === 'd')!;
    expect(Object.keys(d.upstream).sort()).toEqual(['b', 'c']);
    // The join ran after both branches.
    expect(seen.findIndex((s) => s.nodeId === 'd')).toBe(3);

    const run = await env.client.getRun(runId);
    expect(run).toMatchObject({ state: 'completed', workflow: 'diamond', kind: null });
    const steps = await env.client.listSteps(runId);
    expect(steps.map((s) => [s.nodeId, s.type, s.kind, s.state, s.after])).toEqual([
      ['a', 'step', 'add', 'completed', []],
      ['b', 'step', 'add', 'completed', ['a']],
      ['c', 'step', 'add', 'completed', ['a']],
      ['d', 'step', 'add', 'completed', ['b', 'c']],
    ]);
  });

  it('starts by name too, and nodes below an unfinished upstream stay pending', async () => {
    const env = await createEnv({ workflows, pollInterval: fastPoll });
    const runId = await env.client.start('held', { base: 0 });
    const call = await probe.call(runId);
    expect(await stateOf(env, runId)).toEqual({ first: 'running', second: 'pending' });
    call.release('done');
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ second: { node: 'second', n: 0 } });
  });

  it('completes a waiting signal node with the payload as its output (a late signal)', async () => {
    const env = await createEnv({ workflows, pollInterval: fastPoll });
    const runId = await env.client.start(Approval, { base: 2 });
    await untilStates(env, runId, { a: 'completed', approval: 'waiting_signal', d: 'pending' }, 'the signal wait');

    expect(await env.client.signal(runId, 'approval', { n: 40, by: 'ops' })).toBe(true);
    expect(await env.client.output(runId, 'approval')).toEqual({ n: 40, by: 'ops' });
    // d sums its upstream (the signal's n) and the base.
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ d: { node: 'd', n: 42 } });
    // One signal per node: a second one is refused, and so is a signal to a finished run.
    await expectCycloneError(env.client.signal(runId, 'approval', {}), InvalidStateError, 'invalid_state');
  });

  it('keeps a signal sent before the node waits and consumes it when the node is reached (an early signal)', async () => {
    const env = await createEnv({ workflows, pollInterval: fastPoll });
    const runId = await env.client.start(Held, { base: 0 });
    const call = await probe.call(runId);
    // `held` has no signal node: the name is checked against the run's graph.
    await expectCycloneError(env.client.signal(runId, 'approval', {}), UnknownSignalError, 'unknown_signal');
    call.release('x');
    await env.client.result(runId, { timeout: 10_000 });

    const early = await env.client.start(Approval, { base: 1 });
    // Sent at once: node a may not have finished, the wait not begun.
    const delivered = await env.client.signal(early, 'approval', { n: 10 });
    await expect(env.client.result(early, { timeout: 10_000 })).resolves.toEqual({ d: { node: 'd', n: 11 } });
    expect(typeof delivered).toBe('boolean');
    expect(await env.client.output(early, 'approval')).toEqual({ n: 10 });
    // A second signal for the same node is refused whether the first was kept or delivered.
    await expectCycloneError(env.client.signal(early, 'approval', {}), InvalidStateError, 'invalid_state');
  });

  it('a signal to an unknown run is RunNotFoundError', async () => {
    const env = await createEnv({ workflows });
    await expectCycloneError(
      env.client.signal('00000000-0000-4000-8000-000000000000', 'approval', {}),
      RunNotFoundError,
      'run_not_found',
    );
  });

  it('a signal wait that times out is discarded with signal_timeout and fails the run; retry waits again', async () => {
    const env = await createEnv({ workflows, pollInterval: fastPoll });
    const runId = await env.client.start(TimedApproval, { base: 1 });
    const failed = await expectCycloneError(env.client.result(runId, { timeout: 10_000 }), RunFailedError, 'run_failed');
    expect(failed.message).toContain('signal_timeout');
    const steps = await env.client.listSteps(runId);
    expect(steps.map((s) => [s.nodeId, s.state, s.errorKind])).toEqual([
      ['approval', 'discarded', 'signal_timeout'],
      ['d', 'pending', null],
    ]);
    // Too late now: the run has failed.
    await expectCycloneError(env.client.signal(runId, 'approval', {}), InvalidStateError, 'invalid_state');

    // A retry reopens the wait (with a fresh timeout); a signal then carries the run on.
    await env.client.retry(runId, 'approval');
    expect((await env.client.getRun(runId)).state).toBe('running');
    await untilStates(env, runId, { approval: 'waiting_signal' }, 'the reopened wait');
    expect(await env.client.signal(runId, 'approval', { n: 5 })).toBe(true);
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ d: { node: 'd', n: 6 } });
  });

  it("a signal wait with onTimeout 'continue' completes with null at its timeout and the run goes on", async () => {
    const env = await createEnv({ workflows, pollInterval: fastPoll });
    const runId = await env.client.start(LenientApproval, { base: 3 });
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ d: { node: 'd', n: 3 } });
    expect(await env.client.output(runId, 'approval')).toBeNull();
  });

  it('a sleep node waits its duration on the database clock, then its successors run', async () => {
    const env = await createEnv({ workflows, pollInterval: fastPoll });
    const started = Date.now();
    const runId = await env.client.start(Nap, { base: 1 });
    const waiting = await untilStates(env, runId, { a: 'completed', nap: 'waiting_timer' }, 'the timer');
    expect(waiting.d).toBe('pending');
    const nap = (await env.client.listSteps(runId)).find((s) => s.nodeId === 'nap')!;
    expect(nap.type).toBe('sleep');
    expect(nap.wakeAt).toBeInstanceOf(Date);

    // d's only upstream is the sleep, whose output is null: d = base.
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ d: { node: 'd', n: 1 } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    expect(await env.client.output(runId, 'nap')).toBeNull();
  });

  it('a discarded step fails the run once nothing else can move; nodes below stay pending; retryAll carries it to completion', async () => {
    failing.add('b');
    try {
      const env = await createEnv({ workflows, pollInterval: fastPoll });
      const runId = await env.client.start(Diamond, { base: 1 });
      const failed = await expectCycloneError(env.client.result(runId, { timeout: 10_000 }), RunFailedError, 'run_failed');
      expect(failed.message).toContain('b discarded (permanent: b refuses)');
      // c, on the other branch, still ran to completion before the run failed.
      expect(await stateOf(env, runId)).toEqual({ a: 'completed', b: 'discarded', c: 'completed', d: 'pending' });

      failing.delete('b');
      expect(await env.client.retryAll(runId)).toBe(1);
      await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ d: { node: 'd', n: 5 } });
    } finally {
      failing.delete('b');
    }
  });

  it('pause holds every node (a step finishing meanwhile releases nothing); resume carries on where it stood', async () => {
    const env = await createEnv({ workflows, pollInterval: fastPoll });
    const runId = await env.client.start(Held, { base: 0 });
    const call = await probe.call(runId);

    expect(await env.client.pause(runId)).toBe(true);
    expect(await env.client.pause(runId)).toBe(false);
    expect((await env.client.getRun(runId)).state).toBe('paused');
    expect(await stateOf(env, runId)).toEqual({ first: 'running', second: 'paused' });

    // The running step finishes; its successor does not run while the run is paused.
    call.release('done');
    await untilStates(env, runId, { first: 'completed' }, 'the running step to finish');
    await env.waitForPasses('cyclone:claim', 2);
    expect(await stateOf(env, runId)).toEqual({ first: 'completed', second: 'paused' });
    expect((await env.client.getRun(runId)).state).toBe('paused');

    expect(await env.client.resume(runId)).toBe(true);
    expect(await env.client.resume(runId)).toBe(false);
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ second: { node: 'second', n: 0 } });
    await expectCycloneError(env.client.pause(runId), InvalidStateError, 'invalid_state');
  });

  it('a step that fails or snoozes while its run is paused comes back paused, and runs again only after resume', async () => {
    const env = await createEnv({ workflows, pollInterval: fastPoll });
    const snoozing = await env.client.start(Held, { base: 0 });
    const failing = await env.client.start(Held, { base: 0 });
    const [snoozeCall, failCall] = [await probe.call(snoozing), await probe.call(failing)];
    await env.client.pause(snoozing);
    await env.client.pause(failing);

    // Would be available at once (snooze 0) or after the first backoff; the pause holds both.
    snoozeCall.release(new Snooze(0));
    failCall.release(new Error('flaky'));
    await untilStates(env, snoozing, { first: 'paused' }, 'the snoozed step to come back paused');
    await untilStates(env, failing, { first: 'paused' }, 'the failed step to come back paused');
    // Past the retry's backoff on the database clock, the workers look again.
    await untilDatabaseTime(env, (await env.client.listSteps(failing))[0].scheduledAt);
    await env.waitForPasses('cyclone:claim', 2);
    expect(probe.of(snoozing)).toHaveLength(1);
    expect(probe.of(failing)).toHaveLength(1);
    expect((await env.client.listSteps(failing))[0]).toMatchObject({ state: 'paused', attempt: 2, errorKind: 'error' });

    await env.client.resume(snoozing);
    const again = await probe.call(snoozing, 1);
    again.release('done');
    await expect(env.client.result(snoozing, { timeout: 10_000 })).resolves.toEqual({ second: { node: 'second', n: 0 } });
  });

  it('a step reclaimed from a dead worker, or handed back at shutdown, while its run is paused comes back paused', async () => {
    const env = await createEnv({ workflows, runWorkers: false });
    const worker = await replicaOf(env, { workflows, pollInterval: fastPoll, shutdownTimeout: 200 });
    const reclaimed = await env.client.start(Held, { base: 0 });
    const handedBack = await env.client.start(Held, { base: 0 });
    await probe.call(reclaimed);
    await probe.call(handedBack);
    await env.client.pause(reclaimed);
    await env.client.pause(handedBack);

    // Its worker taken for dead: the lease expires and the sweep reclaims the step.
    await env.expireLease(reclaimed, 'first');
    expect(await stateOf(env, reclaimed)).toEqual({ first: 'paused', second: 'paused' });
    // The worker shuts down with the other handler still running: its step is handed back.
    await worker.close();
    expect(await stateOf(env, handedBack)).toEqual({ first: 'paused', second: 'paused' });

    // Each runs again on resume, and its run completes.
    await replicaOf(env, { workflows, pollInterval: fastPoll });
    for (const runId of [reclaimed, handedBack]) {
      await env.client.resume(runId);
      (await probe.call(runId, 1)).release('done');
      await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ second: { node: 'second', n: 0 } });
    }
  });

  it('resume wakes the workers of a step it makes available again, with polling off', async () => {
    const env = await createEnv({ workflows, pollInterval: POLLING_OFF });
    const runId = await env.client.start(Held, { base: 0 });
    const call = await probe.call(runId);
    await env.client.pause(runId);
    call.release(new Snooze(0));
    await untilStates(env, runId, { first: 'paused' }, 'the snoozed step to come back paused');

    await env.client.resume(runId);
    // No poll for a minute: only resume's wake-up can bring a worker back this soon.
    const again = await probe.call(runId, 1, 5_000);
    again.release('done');
    await expect(env.client.result(runId, { timeout: 5_000 })).resolves.toEqual({ second: { node: 'second', n: 0 } });
  });

  it('a paused run keeps a signal, and its timers wait for resume', async () => {
    const env = await createEnv({ workflows, pollInterval: fastPoll });
    const runId = await env.client.start(Approval, { base: 1 });
    await untilStates(env, runId, { approval: 'waiting_signal' }, 'the signal wait');
    await env.client.pause(runId);
    expect(await env.client.signal(runId, 'approval', { n: 1 })).toBe(false);
    expect(await stateOf(env, runId)).toEqual({ a: 'completed', approval: 'paused', d: 'paused' });
    await env.client.resume(runId);
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ d: { node: 'd', n: 2 } });

    const napping = await env.client.start(Nap, { base: 1 });
    await untilStates(env, napping, { nap: 'waiting_timer' }, 'the timer');
    const [{ wake_at }] = await sql<{ wake_at: Date }>(env, `SELECT wake_at FROM cyclone_steps WHERE run_id = $1 AND node_id = 'nap'`, [napping]);
    await env.client.pause(napping);
    // Past the wake time on the database clock, the timer loop looks again: a paused timer does not fire.
    await untilDatabaseTime(env, wake_at);
    await env.waitForPasses('cyclone:timers', 2);
    expect(await stateOf(env, napping)).toEqual({ a: 'completed', nap: 'paused', d: 'paused' });
    await env.client.resume(napping);
    await expect(env.client.result(napping, { timeout: 10_000 })).resolves.toEqual({ d: { node: 'd', n: 1 } });
  });

  it('cancel stops a workflow run at once: every unfinished node cancelled, the running handler aborted', async () => {
    const env = await createEnv({ workflows, pollInterval: fastPoll, leaseTtl: 300 });
    const runId = await env.client.start(Held, { base: 0 });
    const call = await probe.call(runId);
    expect(await env.client.cancel(runId)).toBe(true);
    expect(await stateOf(env, runId)).toEqual({ first: 'cancelled', second: 'cancelled' });
    await call.aborted;
    call.release('late');
    expect((await env.attemptEnded(runId, { nodeId: 'first' })).outcome).toBe('cancelled');
    expect(await stateOf(env, runId)).toEqual({ first: 'cancelled', second: 'cancelled' });
    expect((await env.client.getRun(runId)).state).toBe('cancelled');
  });
});
