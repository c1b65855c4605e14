import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable, Scope } from '@nestjs/common';
import {
  CycloneError,
  DuplicateNodeError,
  InvalidInputError,
  InvalidOptionError,
  InvalidStepHostError,
  NodeLimitError,
  NonDeterminismError,
  RunFailedError,
  Step,
  UnknownStepError,
  Workflow,
  type WorkflowContext,
} from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { closeAll } from './support/handler-probe.js';
import { untilStates } from './support/node-states.js';

/**
 * Bad input to a workflow written as code (issue 26): each a typed
 * CycloneError with a code and a message that says the fix, the call
 * that was wrong writes nothing, the run fails visibly, and the worker
 * and its other work go on.
 */

/** What each workflow's method caught from its bad call: the error it then let through. */
const caught: unknown[] = [];
/** Which step kind 'shifty' calls its node 'x' with: changed between two passes. */
let shiftyKind = 'first_kind';

@Injectable()
class Kinds {
  @Step('first_kind')
  async first() {
    return 1;
  }

  @Step('second_kind')
  async second() {
    return 2;
  }

  @Step('plain_job')
  async plain(input: { n: number }) {
    return input.n * 2;
  }
}

/** Records the error the call threw, then lets it through, as code that does not expect it would. */
async function noting<T>(call: () => Promise<T> | T): Promise<T> {
  try {
    return await call();
  } catch (err) {
    caught.push(err);
    throw err;
  }
}

@Injectable()
class BadFlows {
  @Workflow('twice')
  async twice(_input: unknown, wf: WorkflowContext) {
    await wf.run('same', () => 1);
    return noting(() => wf.run('same', () => 2));
  }

  @Workflow('not-json')
  async notJson(_input: unknown, wf: WorkflowContext) {
    return noting(() => wf.run('when', () => ({ at: 1n })));
  }

  @Workflow('patch-reuse')
  async patchReuse(_input: unknown, wf: WorkflowContext) {
    await wf.run('tax-v2', () => 'computed');
    return noting(() => wf.patched('tax-v2'));
  }

  @Workflow('overflow', { maxNodes: 5 })
  async overflow(_input: unknown, wf: WorkflowContext) {
    return noting(() => Promise.all(Array.from({ length: 10 }, (_, i) => wf.step(`s-${i}`, 'first_kind', null))));
  }

  @Workflow('shifty')
  async shifty(_input: unknown, wf: WorkflowContext) {
    await noting(() => wf.step('x', shiftyKind, null));
    await wf.waitForSignal('go');
    return 'done';
  }

  @Workflow('unknown-kind')
  async unknownKind(_input: unknown, wf: WorkflowContext) {
    return noting(() => wf.step('x', 'no_such_kind', null));
  }

  @Workflow('stranger')
  async stranger(_input: unknown, wf: WorkflowContext) {
    return noting(() => wf.result('0190a1b2-0000-7000-8000-000000000000'));
  }
}

const envs: CycloneTestEnv[] = [];
afterEach(async () => {
  await closeAll(envs);
  caught.length = 0;
  shiftyKind = 'first_kind';
});

async function createEnv() {
  const env = await CycloneTestEnv.create({ providers: [Kinds, BadFlows], pollInterval: [20, 50] });
  envs.push(env);
  return env;
}

/**
 * Runs `workflow` to its failure, with a plain job beside it that completes
 * all the same; returns the workflow's failed node and what its method caught.
 */
async function failureOf(env: CycloneTestEnv, workflow: string) {
  const runId = await env.client.start(workflow, null);
  const job = await env.client.enqueue('plain_job', { n: 21 });
  await expect(env.client.result(runId, { timeout: 20_000 })).rejects.toBeInstanceOf(RunFailedError);
  expect(await env.client.result(job, { timeout: 20_000 })).toBe(42);
  const steps = await env.client.listSteps(runId);
  const node = steps.find((s) => s.type === 'workflow')!;
  // Failed at once: a replay would make the same call.
  expect(node).toMatchObject({ state: 'discarded', errorKind: 'permanent', attempt: 1 });
  return { runId, node, steps, error: caught.at(-1) };
}

function expectTyped(error: unknown, type: abstract new (...args: never[]) => CycloneError, code: string, fix: RegExp) {
  expect(error).toBeInstanceOf(type);
  expect((error as CycloneError).code).toBe(code);
  expect((error as CycloneError).message).toMatch(fix);
}

describe('bad input to a workflow written as code', () => {
  it('a name used twice in one run: DuplicateNodeError, the second call not written', async () => {
    const env = await createEnv();
    const { node, steps, error } = await failureOf(env, 'twice');
    expectTyped(error, DuplicateNodeError, 'duplicate_node', /give each call its own name/);
    expect(node.error).toBe((error as Error).message);
    expect(steps.filter((s) => s.nodeId === 'same')).toEqual([expect.objectContaining({ output: 1 })]);
  });

  it("a result of wf.run that is not JSON: InvalidInputError, the call's node not written", async () => {
    const env = await createEnv();
    const { steps, error } = await failureOf(env, 'not-json');
    expectTyped(error, InvalidInputError, 'invalid_input', /result of wf\.run\('when'\) is not JSON-serialisable.*plain objects/);
    expect(steps.map((s) => s.nodeId)).toEqual(['not-json']);
  });

  it('a patch id reused with another meaning: the name is taken, and the patch is not written', async () => {
    const env = await createEnv();
    const { steps, error } = await failureOf(env, 'patch-reuse');
    expectTyped(error, DuplicateNodeError, 'duplicate_node', /"tax-v2" for two durable calls/);
    expect(steps.map((s) => [s.nodeId, s.type])).toEqual([
      ['patch-reuse', 'workflow'],
      ['tax-v2', 'run'],
    ]);
  });

  it('more nodes than maxNodes: NodeLimitError, and none of the fan-out written', async () => {
    const env = await createEnv();
    const { steps, error } = await failureOf(env, 'overflow');
    expectTyped(error, NodeLimitError, 'node_limit', /more than 5 nodes.*Raise maxNodes.*wf\.startChild/);
    expect(steps.map((s) => s.nodeId)).toEqual(['overflow']);
  });

  it('a replay that meets a recorded node as something else: NonDeterminismError naming the node', async () => {
    const env = await createEnv();
    const runId = await env.client.start('shifty', null);
    await untilStates(env, runId, { x: 'completed', go: 'waiting_signal' }, 'the first pass to wait');
    shiftyKind = 'second_kind';
    await env.client.signal(runId, 'go', null);
    await expect(env.client.result(runId, { timeout: 20_000 })).rejects.toBeInstanceOf(RunFailedError);
    expectTyped(caught.at(-1), NonDeterminismError, 'non_determinism', /called a step \(wf\.step\) of "second_kind" "x".*recorded "x" as a step \(wf\.step\) of "first_kind".*wf\.patched/);
    expect((caught.at(-1) as NonDeterminismError).nodeId).toBe('x');
  });

  it('a step kind no handler runs, and a wf.result of a run that is not a child: typed errors, nothing written', async () => {
    const env = await createEnv();
    const unknown = await failureOf(env, 'unknown-kind');
    expectTyped(unknown.error, UnknownStepError, 'unknown_step', /Decorate a method of a provider with @Step\('no_such_kind'\)/);
    expect(unknown.steps.map((s) => s.nodeId)).toEqual(['unknown-kind']);
    const stranger = await failureOf(env, 'stranger');
    expectTyped(stranger.error, InvalidOptionError, 'invalid_option', /not a run this run started/);
    expect(stranger.steps.map((s) => s.nodeId)).toEqual(['stranger']);
  });

  it('a workflow method on a provider that is not a singleton, or named like a step kind, fails the start naming the fix', async () => {
    @Injectable({ scope: Scope.REQUEST })
    class PerRequest {
      @Workflow('per-request')
      async run() {
        return 1;
      }
    }
    const scoped = await CycloneTestEnv.create({ providers: [PerRequest] }).catch((err: unknown) => err);
    expectTyped(scoped, InvalidStepHostError, 'invalid_step_host', /PerRequest declares @Workflow\('per-request'\).*make PerRequest a default-scoped provider/);

    @Injectable()
    class Clash {
      @Workflow('plain_job')
      async run() {
        return 1;
      }
    }
    const clash = await CycloneTestEnv.create({ providers: [Kinds, Clash] }).catch((err: unknown) => err);
    expectTyped(clash, InvalidOptionError, 'invalid_option', /@Workflow\('plain_job'\) on Clash\.run: that name is already a step kind.*rename one of them/);
  });
});
