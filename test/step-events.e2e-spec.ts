import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable, Scope } from '@nestjs/common';
import {
  CycloneDatabase,
  InvalidOptionError,
  InvalidStepHostError,
  OnStepEvent,
  PermanentError,
  Step,
  defineStep,
  type StepContext,
  type StepEvent,
  type StepEventName,
} from 'cyclone-nestjs';
import { CycloneTestEnv, type CycloneTestEnvOptions } from 'cyclone-nestjs/testing';
import { expectCycloneError } from './support/e2e-helpers.js';
import { HandlerProbe, claimAsDeadWorker, closeAll } from './support/handler-probe.js';
import { CapturingLogger } from './support/nest-app-harness.js';
import { waitFor } from './support/wait.js';

const probe = new HandlerProbe();

/** What each listener heard, with the step's state in the database when it was called. */
const heard: { listener: string; event: StepEvent; stateThen: string }[] = [];
const heardOf = (runId: string, listener = 'all') =>
  heard.filter((h) => h.event.runId === runId && h.listener === listener).map((h) => h.event);

const Greet = defineStep<{ name: string }, { greeting: string; at: Date }>('greet');

@Injectable()
class Steps {
  @Step(Greet)
  async greet(input: { name: string }) {
    return { greeting: `hello ${input.name}`, at: new Date(0) };
  }

  @Step('flaky', { maxAttempts: 3, backoff: () => 10 })
  async flaky(_input: unknown, ctx: StepContext) {
    if (ctx.attempt === 1) throw new Error('the first attempt fails');
    return ctx.attempt;
  }

  @Step('doomed', { maxAttempts: 2, backoff: () => 10 })
  async doomed(_input: unknown, ctx: StepContext): Promise<never> {
    throw new Error(`attempt ${ctx.attempt} fails`);
  }

  @Step('refused')
  async refused(): Promise<never> {
    throw new PermanentError('no such address');
  }

  @Step('held', { maxReclaims: 0 })
  async held(_input: unknown, ctx: StepContext) {
    return probe.cooperate(ctx);
  }

  @Step('listened_slowly')
  async listenedSlowly(input: number) {
    return input;
  }

  @Step('listened_badly', { maxAttempts: 2, backoff: () => 10 })
  async listenedBadly(input: { failFirst: boolean }, ctx: StepContext) {
    if (input.failFirst && ctx.attempt === 1) throw new Error('fails once');
    return 'done';
  }
}

@Injectable()
class Listeners {
  constructor(private readonly database: CycloneDatabase) {}

  /** Kept in the order the listener was called; the state is read just after. */
  private async record(listener: string, event: StepEvent): Promise<void> {
    const entry = { listener, event, stateThen: '(not read yet)' };
    heard.push(entry);
    const { rows } = await this.database.pool.query<{ state: string }>(
      'SELECT state FROM cyclone_steps WHERE run_id = $1 AND node_id = $2',
      [event.runId, event.nodeId],
    );
    entry.stateThen = rows[0]?.state;
  }

  @OnStepEvent('completed')
  @OnStepEvent('failed')
  @OnStepEvent('retried')
  @OnStepEvent('discarded')
  @OnStepEvent('cancelled')
  async all(event: StepEvent): Promise<void> {
    if (event.kind.startsWith('listened_')) return;
    await this.record('all', event);
  }

  @OnStepEvent('completed', Greet)
  async greeted(event: StepEvent<{ greeting: string }>): Promise<void> {
    await this.record('greet only', event);
  }
}

/** Listeners that misbehave: one never finishes, the others throw or reject. */
const slowCalls: StepEvent[] = [];
@Injectable()
class BadListeners {
  @OnStepEvent('completed', 'listened_slowly')
  async never(event: StepEvent): Promise<void> {
    slowCalls.push(event);
    await new Promise(() => undefined);
  }

  @OnStepEvent('completed', 'listened_badly')
  @OnStepEvent('failed', 'listened_badly')
  throws(event: StepEvent): void {
    throw new Error(`listener exploded on ${event.event}`);
  }

  @OnStepEvent('completed', 'listened_badly')
  @OnStepEvent('retried', 'listened_badly')
  async rejects(event: StepEvent): Promise<void> {
    throw new Error(`listener rejected on ${event.event}`);
  }
}

const envs: CycloneTestEnv[] = [];
afterEach(async () => {
  probe.releaseAll();
  await closeAll(envs);
  probe.reset();
  heard.length = 0;
});

async function start(options: CycloneTestEnvOptions = {}): Promise<CycloneTestEnv> {
  const env = await CycloneTestEnv.create({ providers: [Steps, Listeners, BadListeners], workers: 4, ...options });
  envs.push(env);
  return env;
}

/** Waits until `listener` has heard `count` events of the run, and returns their names in order. */
async function eventsOf(runId: string, count: number, listener = 'all'): Promise<StepEventName[]> {
  await waitFor(`${count} events of run ${runId}`, () => {
    const events = heard.filter((h) => h.event.runId === runId && h.listener === listener);
    return events.length >= count && events.every((h) => h.stateThen !== '(not read yet)');
  });
  return heardOf(runId, listener).map((e) => e.event);
}

describe('@OnStepEvent', () => {
  it('hears a completion after it committed, with the output as stored, and a kind filter hears only its kind', async () => {
    const env = await start();
    const runId = await env.client.enqueue(Greet, { name: 'ada' });
    await env.runUntilComplete(runId);
    expect(await eventsOf(runId, 1)).toEqual(['completed']);
    const [completed] = heard.filter((h) => h.event.runId === runId && h.listener === 'all');
    expect(completed.event).toEqual({
      event: 'completed',
      runId,
      nodeId: 'greet',
      kind: 'greet',
      queue: 'default',
      attempt: 1,
      output: { greeting: 'hello ada', at: '1970-01-01T00:00:00.000Z' },
    });
    expect(completed.stateThen).toBe('completed');
    expect(await eventsOf(runId, 1, 'greet only')).toEqual(['completed']);

    const other = await env.client.enqueue('flaky', null);
    await env.runUntilComplete(other);
    await eventsOf(other, 3);
    expect(heardOf(other, 'greet only')).toEqual([]);
  });

  it('hears each failed attempt, then retried or discarded, with the error stored, in order', async () => {
    const env = await start();
    const flaky = await env.client.enqueue('flaky', null);
    const doomed = await env.client.enqueue('doomed', null);
    const refused = await env.client.enqueue('refused', null);
    for (const runId of [flaky, doomed, refused]) await env.runUntilComplete(runId);

    expect(await eventsOf(flaky, 3)).toEqual(['failed', 'retried', 'completed']);
    expect(heardOf(flaky).map((e) => e.attempt)).toEqual([1, 1, 2]);
    expect(heardOf(flaky)[1]).toMatchObject({ error: 'the first attempt fails', errorKind: 'error' });

    expect(await eventsOf(doomed, 4)).toEqual(['failed', 'retried', 'failed', 'discarded']);
    expect(heardOf(doomed)[3]).toMatchObject({ attempt: 2, error: 'attempt 2 fails', errorKind: 'error' });
    expect(heard.find((h) => h.event.runId === doomed && h.event.event === 'discarded')?.stateThen).toBe('discarded');

    expect(await eventsOf(refused, 2)).toEqual(['failed', 'discarded']);
    expect(heardOf(refused)[1]).toMatchObject({ error: 'no such address', errorKind: 'permanent' });
  });

  it('hears a running attempt cancelled, and a step the sweep discarded past maxReclaims', async () => {
    const env = await start({ leaseTtl: 300 });
    const cancelled = await env.client.enqueue('held', null);
    const call = await probe.call(cancelled);
    await env.client.cancel(cancelled);
    await call.aborted;
    expect(await eventsOf(cancelled, 1)).toEqual(['cancelled']);
    expect(heardOf(cancelled)[0]).toEqual({
      event: 'cancelled',
      runId: cancelled,
      nodeId: 'held',
      kind: 'held',
      queue: 'default',
      attempt: 1,
    });

    // A dead worker's step with no reclaims left: this client's sweep discards it (no attempt failed).
    const stranded = await env.client.enqueue('held', null, { queue: 'unserved' });
    await claimAsDeadWorker(env, ['held'], { queue: 'unserved', leaseTtlMs: 1 });
    expect(await eventsOf(stranded, 1)).toEqual(['discarded']);
    expect(heardOf(stranded)[0]).toMatchObject({ errorKind: 'reclaim_limit', error: expect.stringContaining('maxReclaims is 0') });
    expect(heard.find((h) => h.event.runId === stranded)?.stateThen).toBe('discarded');
  });

  it('a listener that never finishes delays no step, nor the shutdown', async () => {
    const env = await start({ workers: 1 });
    const started = Date.now();
    // One worker slot: each job runs after the one before has completed and been heard.
    const runs = await Promise.all([1, 2, 3, 4, 5].map((i) => env.client.enqueue('listened_slowly', i)));
    for (const runId of runs) expect(await env.client.result(runId, { timeout: 5_000 })).toBe(runs.indexOf(runId) + 1);
    await waitFor('every completion to reach the listener', () => slowCalls.length >= 5);
    // Five no-op jobs, one at a time: well under a second each, with the listener still pending.
    expect(Date.now() - started).toBeLessThan(2_500);
    const closing = Date.now();
    await env.close();
    envs.length = 0;
    expect(Date.now() - closing).toBeLessThan(5_000);
  });

  it('a listener that throws or rejects is logged, naming it, and changes nothing about the step', async () => {
    const logger = new CapturingLogger();
    const env = await start({ logger });
    const once = await env.client.enqueue('listened_badly', { failFirst: true });
    const clean = await env.client.enqueue('listened_badly', { failFirst: false });
    expect(await env.client.result(once)).toBe('done');
    expect(await env.client.result(clean)).toBe('done');
    const steps = await env.client.listSteps(once);
    expect(steps[0]).toMatchObject({ state: 'completed', attempt: 2, output: 'done' });
    expect((await env.client.listSteps(clean))[0]).toMatchObject({ state: 'completed', attempt: 1 });

    const failures = () => logger.messages.filter((m) => m.includes('listener BadListeners.'));
    await waitFor('every listener failure to be logged', () => failures().length >= 6);
    expect(failures()).toEqual(
      expect.arrayContaining([
        expect.stringContaining(`The @OnStepEvent('failed') listener BadListeners.throws failed for step listened_badly of run ${once}: listener exploded on failed`),
        expect.stringContaining(`The @OnStepEvent('retried') listener BadListeners.rejects failed for step listened_badly of run ${once}: listener rejected on retried`),
        expect.stringContaining(`The @OnStepEvent('completed') listener BadListeners.throws failed for step listened_badly of run ${clean}`),
        expect.stringContaining(`The @OnStepEvent('completed') listener BadListeners.rejects failed for step listened_badly of run ${clean}`),
      ]),
    );
    expect(failures().every((m) => m.endsWith('The step is not affected.'))).toBe(true);
  });
});

describe('@OnStepEvent at startup', () => {
  it('refuses an event that is not a step event, naming the method and the events', async () => {
    @Injectable()
    class Typo {
      @OnStepEvent('complete' as StepEventName)
      done(): void {}
    }
    const err = await expectCycloneError(CycloneTestEnv.create({ providers: [Typo], logger: false }), InvalidOptionError, 'invalid_option');
    expect(err.message).toBe(
      `Typo.done has @OnStepEvent('complete'), which is not a step event. Use one of: completed, failed, retried, discarded, cancelled.`,
    );
  });

  it('refuses a request-scoped listener host: events come from no request', async () => {
    @Injectable({ scope: Scope.REQUEST })
    class PerRequest {
      @OnStepEvent('completed')
      done(): void {}
    }
    const err = await expectCycloneError(
      CycloneTestEnv.create({ providers: [PerRequest], logger: false }),
      InvalidStepHostError,
      'invalid_step_host',
    );
    expect(err.message).toContain('PerRequest declares @OnStepEvent listeners but is request-scoped');
  });

  it('warns of a listener for a kind no handler of the app runs', async () => {
    @Injectable()
    class Stray {
      @OnStepEvent('discarded', 'no_such_kind')
      done(): void {}
    }
    const logger = new CapturingLogger();
    envs.push(await CycloneTestEnv.create({ providers: [Steps, Stray], logger }));
    expect(logger.messages).toContainEqual(
      expect.stringContaining(`Stray.done listens with @OnStepEvent('discarded', 'no_such_kind'), but no @Step('no_such_kind') is registered`),
    );
  });
});
