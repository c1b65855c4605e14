import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import {
  CycloneError,
  DuplicateError,
  InvalidInputError,
  InvalidOptionError,
  InvalidStateError,
  InvalidWorkflowError,
  RunFailedError,
  Step,
  StepNotFoundError,
  UnknownWorkflowError,
  defineWorkflow,
  type StepContext,
  type WorkflowDefinition,
} from 'cyclone-nestjs';
import { CycloneTestEnv, type CycloneTestEnvOptions } from 'cyclone-nestjs/testing';
import { countRows, expectCycloneError, expectRejectedWritingNothing } from './support/e2e-helpers.js';
import { stateOf, untilStates } from './support/node-states.js';
import { sleep } from './support/wait.js';

@Injectable()
class DefinitionSteps {
  /** Returns its node id, so a test can see which node ran. */
  @Step('work')
  async work(_input: unknown, ctx: StepContext) {
    return { node: ctx.nodeId };
  }
}

/** Casts for values a TypeScript caller could not pass, but a JavaScript one (or `any`) can. */
const loose = (value: unknown) => value as any;

const fastPoll: [number, number] = [20, 50];

/** Starts an environment that is expected to fail; returns the error it failed with. */
async function startupError(options: CycloneTestEnvOptions): Promise<Error> {
  let env: CycloneTestEnv | undefined;
  try {
    env = await CycloneTestEnv.create({ providers: [DefinitionSteps], ...options, logger: false });
  } catch (err) {
    return err as Error;
  }
  await env.close();
  throw new Error('expected the app to fail at startup');
}

/** A valid workflow, registered beside the invalid ones so that they are what fails. */
const Valid = defineWorkflow('valid').step('a', 'work').step('b', 'work', { after: ['a'] });

describe('workflow definitions are checked when the module starts', () => {
  it.each<[string, WorkflowDefinition<any>, string, RegExp]>([
    [
      'a cycle',
      defineWorkflow('cyclic')
        .step('start', 'work')
        .step('a', 'work', { after: ['start', 'b'] })
        .step('b', 'work', { after: ['a'] }),
      'a|b',
      /cycle: (a → b → a|b → a → b)/,
    ],
    ['an unknown `after`', defineWorkflow('dangling').step('a', 'work').step('b', 'work', { after: ['nope'] }), 'b', /"nope"/],
    ['a duplicate node id', defineWorkflow('doubled').step('a', 'work').waitForSignal('a'), 'a', /unique/],
    ['an unknown step kind', defineWorkflow('typo').step('a', 'work').step('send', 'send_emial', { after: ['a'] }), 'send', /"send_emial"/],
  ])('%s fails startup with InvalidWorkflowError naming the workflow and the node', async (_what, def, node, detail) => {
    const err = await startupError({ workflows: [Valid, def] });
    expect(err).toBeInstanceOf(InvalidWorkflowError);
    const invalid = err as InvalidWorkflowError;
    expect(invalid.code).toBe('invalid_workflow');
    expect(invalid.workflow).toBe(def.name);
    expect(invalid.nodeId).toMatch(new RegExp(`^(${node})$`));
    expect(invalid.message).toContain(`Workflow "${def.name}"`);
    expect(invalid.message).toContain(`node "${invalid.nodeId}"`);
    expect(invalid.message).toMatch(detail);
  });

  it('bad node options fail startup, naming the node and the option', async () => {
    const err = await startupError({
      workflows: [defineWorkflow('loud').step('a', 'work').step('shout', 'work', { after: ['a'], priority: 5_000 })],
    });
    expect(err).toBeInstanceOf(InvalidWorkflowError);
    expect(err.message).toContain('node "shout"');
    expect(err.message).toContain('"priority"');
  });

  it('two workflows with the same name fail startup, naming it', async () => {
    const err = await startupError({
      workflows: [defineWorkflow('twin').step('a', 'work'), Valid, defineWorkflow('twin').step('b', 'work')],
    });
    expect(err).toBeInstanceOf(InvalidWorkflowError);
    expect((err as InvalidWorkflowError).code).toBe('invalid_workflow');
    expect((err as InvalidWorkflowError).workflow).toBe('twin');
    expect(err.message).toContain('Workflow "twin"');
    expect(err.message).toMatch(/unique/);
  });

  it('the same definition listed twice fails startup too', async () => {
    const err = await startupError({ workflows: [Valid, Valid] });
    expect(err).toBeInstanceOf(InvalidWorkflowError);
    expect(err.message).toContain('Workflow "valid"');
  });

  it.each<[string, unknown]>([
    ['one workflow, not in an array', Valid],
    ['a name', 'valid'],
    ['an array holding a plain object that looks like a workflow', [{ name: 'fake', nodes: [] }]],
    ['an array holding a name', [Valid, 'valid']],
    ['an array holding null', [null]],
  ])('`workflows` that is %s fails startup with InvalidOptionError', async (_what, workflows) => {
    const err = await startupError({ workflows: loose(workflows) });
    expect(err).toBeInstanceOf(InvalidOptionError);
    expect((err as CycloneError).code).toBe('invalid_option');
    expect(err.message).toContain('"workflows"');
    expect(err.message).toContain('defineWorkflow');
  });
});

/** Waits for a signal that never comes unless the test sends it. */
const Gate = defineWorkflow<{ n: number }>('gate').step('a', 'work').waitForSignal('open', { after: ['a'] }).step('b', 'work', { after: ['open'] });

describe('start refuses bad calls with a typed error and writes nothing', () => {
  const MAX_PAYLOAD_BYTES = 1_024;
  let env: CycloneTestEnv;
  beforeAll(async () => {
    env = await CycloneTestEnv.create({ providers: [DefinitionSteps], workflows: [Gate], maxPayloadBytes: MAX_PAYLOAD_BYTES });
  });
  afterAll(async () => env?.close());


  it('a workflow object that was never registered throws UnknownWorkflowError naming it and the fix', async () => {
    const Stray = defineWorkflow('stray').step('a', 'work');
    const err = await expectRejectedWritingNothing(env, () => env.client.start(Stray, {}), UnknownWorkflowError, 'unknown_workflow');
    expect(err.workflow).toBe('stray');
    expect(err.message).toContain('"stray"');
    expect(err.message).toContain('workflows');
  });

  it('a different definition with a registered name is refused, not silently swapped for the registered graph', async () => {
    const Namesake = defineWorkflow('gate').step('other', 'work');
    const err = await expectRejectedWritingNothing(
      env,
      () => env.client.start(Namesake, { n: 1 }),
      UnknownWorkflowError,
      'unknown_workflow',
    );
    expect(err.message).toContain('not the one registered as "gate"');
  });

  it.each(['stray', 'Gate', 'gate ', ''])('a workflow name %p that is not registered throws UnknownWorkflowError', async (name) => {
    const err = await expectRejectedWritingNothing(env, () => env.client.start(name, {}), UnknownWorkflowError, 'unknown_workflow');
    expect(err.workflow).toBe(name);
  });

  it('a value that is neither a workflow nor a name throws UnknownWorkflowError', async () => {
    await expectRejectedWritingNothing(env, () => env.client.start(loose(undefined), {}), UnknownWorkflowError, 'unknown_workflow');
    await expectRejectedWritingNothing(env, () => env.client.start(loose(42), {}), UnknownWorkflowError, 'unknown_workflow');
  });

  it.each<[string, unknown, string]>([
    ['an unknown option', { retries: 3 }, '"retries"'],
    ['an enqueue-only option', { processIn: '1m' }, '"processIn"'],
    ['an unparsable retention', { retention: 'forever' }, '"retention"'],
    ['a negative retention', { retention: -1 }, '"retention"'],
    ['a retention over 100 years', { retention: '1000000d' }, '"retention"'],
    ['an empty unique key', { unique: '' }, '"unique"'],
    ['a unique key over 200 characters', { unique: 'k'.repeat(201) }, '"unique"'],
    ['a unique key that is not a string', { unique: 42 }, '"unique"'],
  ])('%s throws InvalidOptionError naming the option', async (_what, opts, option) => {
    const err = await expectRejectedWritingNothing(
      env,
      () => env.client.start(Gate, { n: 1 }, loose(opts)),
      InvalidOptionError,
      'invalid_option',
    );
    expect(err.message).toContain(option);
  });

  it('options that are not an object throw InvalidOptionError', async () => {
    await expectRejectedWritingNothing(env, () => env.client.start(Gate, { n: 1 }, loose('fast')), InvalidOptionError, 'invalid_option');
    await expectRejectedWritingNothing(env, () => env.client.start(Gate, { n: 1 }, loose(null)), InvalidOptionError, 'invalid_option');
  });

  it.each<[string, unknown, RegExp]>([
    ['a bigint', { n: 1n }, /\$\.n is a bigint/],
    ['a function', { n: () => 1 }, /\$\.n is a function/],
    ['a Map', { n: new Map() }, /\$\.n is a Map/],
    ['NaN', { n: NaN }, /NaN/],
    ['a cyclic object', (() => { const a: Record<string, unknown> = {}; a.self = a; return a; })(), /refers back to itself/],
  ])('input that is %s throws InvalidInputError saying where', async (_what, input, reason) => {
    const err = await expectRejectedWritingNothing(env, () => env.client.start(Gate, loose(input)), InvalidInputError, 'invalid_input');
    expect(err.message).toMatch(reason);
  });

  it('input over maxPayloadBytes throws InvalidInputError', async () => {
    const err = await expectRejectedWritingNothing(
      env,
      () => env.client.start(Gate, loose({ s: 'x'.repeat(2_000) })),
      InvalidInputError,
      'invalid_input',
    );
    expect(err.message).toContain('maxPayloadBytes');
  });
});

describe('workflow runs', () => {
  const envs: CycloneTestEnv[] = [];
  afterEach(async () => {
    for (const env of envs.splice(0)) await env.close();
  });
  const createEnv = async (workflows: WorkflowDefinition<any>[]) => {
    const env = await CycloneTestEnv.create({ providers: [DefinitionSteps], workflows, pollInterval: fastPoll });
    envs.push(env);
    return env;
  };

  it('start with `unique` twice throws DuplicateError carrying the first runId; the key is free again once that run finishes', async () => {
    const env = await createEnv([Gate]);
    const first = await env.client.start(Gate, { n: 1 }, { unique: 'gate:1' });
    const before = await countRows(env);

    const err = await expectCycloneError(env.client.start(Gate, { n: 2 }, { unique: 'gate:1' }), DuplicateError, 'duplicate');
    expect(err.runId).toBe(first);
    expect(err.uniqueKey).toBe('gate:1');
    expect(err.message).toContain(first);
    // The refused start wrote nothing; a different key is not affected.
    expect(await countRows(env)).toEqual(before);
    const other = await env.client.start(Gate, { n: 3 }, { unique: 'gate:2' });
    expect(other).not.toBe(first);
    expect((await env.client.getRun(first)).uniqueKey).toBe('gate:1');

    // Still held while the first run waits for its signal.
    await untilStates(env, first, { open: 'waiting_signal' }, 'the first run to wait');
    await expectCycloneError(env.client.start(Gate, { n: 4 }, { unique: 'gate:1' }), DuplicateError, 'duplicate');

    await env.client.signal(first, 'open', null);
    await expect(env.client.result(first, { timeout: 10_000 })).resolves.toEqual({ b: { node: 'b' } });
    const again = await env.client.start(Gate, { n: 5 }, { unique: 'gate:1' });
    expect(again).not.toBe(first);
    expect(await env.client.getRun(again)).toMatchObject({ state: 'running', workflow: 'gate', uniqueKey: 'gate:1' });
  });

  it('concurrent starts with one `unique` key: exactly one run is created, every other start gets its runId', async () => {
    const env = await createEnv([Gate]);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 8 }, (_, n) => env.client.start(Gate, { n }, { unique: 'gate:race' })),
    );
    const started = outcomes.filter((o): o is PromiseFulfilledResult<string> => o.status === 'fulfilled').map((o) => o.value);
    expect(started).toHaveLength(1);
    const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected').map((o) => o.reason);
    expect(refused).toHaveLength(7);
    for (const err of refused) {
      expect(err).toBeInstanceOf(DuplicateError);
      expect((err as DuplicateError).runId).toBe(started[0]);
    }
    expect(await countRows(env)).toEqual({ runs: 1, steps: 3 });
  });

  const LongNap = defineWorkflow('long-nap')
    .step('a', 'work')
    .sleep('nap', '1h', { after: ['a'] })
    .step('b', 'work', { after: ['nap'] });

  it('fireTimer completes a long sleep at once, and the workflow goes on to completion', async () => {
    const env = await createEnv([LongNap]);
    const startedAt = Date.now();
    const runId = await env.client.start(LongNap, {});
    await untilStates(env, runId, { a: 'completed', nap: 'waiting_timer', b: 'pending' }, 'the sleep to begin');
    const nap = (await env.client.listSteps(runId)).find((s) => s.nodeId === 'nap')!;
    // An hour from when the sleep began (the database clock; a minute of slack each way).
    expect(nap.wakeAt!.getTime()).toBeGreaterThan(startedAt + 59 * 60_000);
    expect(nap.wakeAt!.getTime()).toBeLessThan(Date.now() + 61 * 60_000);

    expect(await env.fireTimer(runId, 'nap')).toBe('slept');
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ b: { node: 'b' } });
    expect(await env.client.output(runId, 'nap')).toBeNull();
    expect(Date.now() - startedAt).toBeLessThan(60_000);
  });

  it('fireTimer reports the sleep it fired even while the timer loop polls every few milliseconds', async () => {
    const env = await createEnv([LongNap]);
    const runIds = await Promise.all(Array.from({ length: 100 }, () => env.client.start(LongNap, {})));
    for (const runId of runIds) await untilStates(env, runId, { nap: 'waiting_timer' }, 'the sleep to begin');
    // Each call brings its timer due and fires it in one transaction: the loop never sees it due first.
    const outcomes: string[] = [];
    for (const runId of runIds) outcomes.push(await env.fireTimer(runId, 'nap'));
    expect(outcomes).toEqual(runIds.map(() => 'slept'));
    for (const runId of runIds) await env.runUntilComplete(runId, { timeout: 10_000 });
  });

  it('fireTimer on a node that is not waiting on a timer throws InvalidStateError; on an unknown node StepNotFoundError', async () => {
    const Forever = defineWorkflow('forever').step('a', 'work').waitForSignal('open', { after: ['a'] }).sleep('nap', '1h', { after: ['open'] });
    const env = await createEnv([LongNap, Forever]);

    const runId = await env.client.start(Forever, {});
    await untilStates(env, runId, { a: 'completed', open: 'waiting_signal', nap: 'pending' }, 'the signal wait');
    // Completed, pending, and a signal wait without a timeout: none has a timer.
    for (const [nodeId, state] of [
      ['a', 'completed'],
      ['nap', 'pending'],
      ['open', 'waiting_signal'],
    ]) {
      const err = await expectCycloneError(env.fireTimer(runId, nodeId), InvalidStateError, 'invalid_state');
      expect(err.message).toContain(`"${nodeId}"`);
      expect(err.message).toContain(state);
    }
    await expectCycloneError(env.fireTimer(runId, 'nope'), StepNotFoundError, 'step_not_found');
    // Nothing moved.
    expect(await stateOf(env, runId)).toEqual({ a: 'completed', open: 'waiting_signal', nap: 'pending' });

    // A timer that already fired cannot fire again.
    const napping = await env.client.start(LongNap, {});
    await untilStates(env, napping, { nap: 'waiting_timer' }, 'the sleep to begin');
    await env.fireTimer(napping, 'nap');
    await env.runUntilComplete(napping, { timeout: 10_000 });
    await expectCycloneError(env.fireTimer(napping, 'nap'), InvalidStateError, 'invalid_state');
  });

  it('fireTimer on a signal wait with a timeout times it out at once: discarded with signal_timeout, the run fails', async () => {
    const Deadline = defineWorkflow('deadline').waitForSignal('open', { timeout: '1d' }).step('b', 'work', { after: ['open'] });
    const env = await createEnv([Deadline]);
    const runId = await env.client.start(Deadline, {});
    await untilStates(env, runId, { open: 'waiting_signal' }, 'the signal wait');
    expect(await env.fireTimer(runId, 'open')).toBe('signal_timeout');
    await expectCycloneError(env.client.result(runId, { timeout: 10_000 }), RunFailedError, 'run_failed');
    const steps = await env.client.listSteps(runId);
    expect(steps.map((s) => [s.nodeId, s.state, s.errorKind])).toEqual([
      ['open', 'discarded', 'signal_timeout'],
      ['b', 'pending', null],
    ]);
  });

  it('listSteps shows every node of a workflow with its type, kind (null for waits), upstream nodes, state and wake time', async () => {
    const Shape = defineWorkflow('shape')
      .step('a', 'work')
      .waitForSignal('approval', { after: ['a'], timeout: '1h' })
      .waitForSignal('note', { after: ['a'] })
      .sleep('nap', '2h', { after: ['a'] })
      .step('d', 'work', { after: ['approval', 'note', 'nap'] });
    const env = await createEnv([Shape]);
    const startedAt = Date.now();
    const runId = await env.client.start(Shape, { user: 1 });

    await untilStates(env, runId, { a: 'completed', approval: 'waiting_signal', note: 'waiting_signal', nap: 'waiting_timer' }, 'the waits');
    const steps = await env.client.listSteps(runId);
    expect(steps.map((s) => [s.nodeId, s.type, s.kind, s.after, s.state])).toEqual([
      ['a', 'step', 'work', [], 'completed'],
      ['approval', 'signal', null, ['a'], 'waiting_signal'],
      ['note', 'signal', null, ['a'], 'waiting_signal'],
      ['nap', 'sleep', null, ['a'], 'waiting_timer'],
      ['d', 'step', 'work', ['approval', 'note', 'nap'], 'pending'],
    ]);
    const byId = Object.fromEntries(steps.map((s) => [s.nodeId, s]));
    // A wake time only where a timer runs: the timed signal wait and the sleep.
    expect(byId.a.wakeAt).toBeNull();
    expect(byId.note.wakeAt).toBeNull();
    expect(byId.d.wakeAt).toBeNull();
    const hoursFromStart = (d: Date | null) => (d!.getTime() - startedAt) / 3_600_000;
    expect(hoursFromStart(byId.approval.wakeAt)).toBeGreaterThan(0.98);
    expect(hoursFromStart(byId.approval.wakeAt)).toBeLessThan(1.02);
    expect(hoursFromStart(byId.nap.wakeAt)).toBeGreaterThan(1.98);
    expect(hoursFromStart(byId.nap.wakeAt)).toBeLessThan(2.02);
    expect(steps.every((s) => s.runId === runId)).toBe(true);

    expect(await env.client.signal(runId, 'approval', { ok: true })).toBe(true);
    expect(await env.client.signal(runId, 'note', 'hi')).toBe(true);
    await env.fireTimer(runId, 'nap');
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ d: { node: 'd' } });
    const done = await env.client.listSteps(runId);
    expect(done.map((s) => [s.nodeId, s.state, s.output])).toEqual([
      ['a', 'completed', { node: 'a' }],
      ['approval', 'completed', { ok: true }],
      ['note', 'completed', 'hi'],
      ['nap', 'completed', null],
      ['d', 'completed', { node: 'd' }],
    ]);
  });
});
