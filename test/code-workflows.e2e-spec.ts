import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import {
  CycloneDatabase,
  CycloneStats,
  OnStepEvent,
  PermanentError,
  RunCancelledError,
  RunFailedError,
  Step,
  StepFailedError,
  Workflow,
  defineStep,
  defineWorkflow,
  type StepContext,
  type StepEvent,
  type WorkflowContext,
} from 'cyclone-nestjs';
import { CycloneHealthIndicator, CycloneHealthModule } from 'cyclone-nestjs/health';
import { CycloneTestEnv, TestDatabase } from 'cyclone-nestjs/testing';
import { closeAll, lastTickAt } from './support/handler-probe.js';
import { untilStates } from './support/node-states.js';
import { waitFor } from './support/wait.js';
import { CLAIM_WORKFLOWS } from '../libs/cyclone/src/sql/code-workflow.sql.js';
import { RetentionSweeper } from '../libs/cyclone/src/maintenance/retention.sweeper.js';

/** What the inline calls and steps did, in order: a test counts what ran. */
const effects: string[] = [];
/** Step inputs that fail (PermanentError) while listed. */
const refusing = new Set<string>();

const Reserve = defineStep<{ sku: string }, { sku: string; reserved: true }>('reserve_item');
const Receipt = defineWorkflow<{ total: number }, { receipt: string }>('receipt');

interface Order {
  id: string;
  items: string[];
}

@Injectable()
class OrderSteps {
  @Step(Reserve)
  async reserve(input: { sku: string }, ctx: StepContext) {
    effects.push(`reserve ${input.sku} (${ctx.nodeId})`);
    if (refusing.has(input.sku)) throw new PermanentError(`${input.sku} is out of stock`);
    return { sku: input.sku, reserved: true as const };
  }
}

@Injectable()
class OrderFlows {
  @Workflow('order', { maxAttempts: 3 })
  async order(input: Order, wf: WorkflowContext<Order>) {
    const total = await wf.run('price', () => {
      effects.push(`price ${input.id}`);
      return input.items.length * 10;
    });
    let reserved: { sku: string }[];
    try {
      reserved = await Promise.all(input.items.map((sku, i) => wf.step(`reserve-${i}`, Reserve, { sku })));
    } catch (err) {
      // Compensation: release what was reserved, once each.
      const failed = (err as StepFailedError).nodeId;
      await wf.run('release', () => {
        effects.push(`release after ${failed}`);
        return failed;
      });
      return { ok: false, failed };
    }
    await wf.sleep('cool-off', 50);
    const approval = await wf.waitForSignal<{ by: string }>('approval');
    const receiptRun = await wf.startChild('receipt', Receipt, { total });
    const receipt = await wf.result(receiptRun);
    const taxed = wf.patched('tax-v2') ? total * 1.2 : total;
    return { ok: true, total: taxed, items: reserved.map((r) => r.sku), approvedBy: approval.by, receipt: receipt.receipt };
  }

  @Workflow(Receipt)
  async receipt(input: { total: number }, wf: WorkflowContext) {
    const number = await wf.run('number', () => {
      effects.push('receipt number');
      return `R-${input.total}`;
    });
    return { receipt: number };
  }
}

const envs: CycloneTestEnv[] = [];
afterEach(async () => {
  await closeAll(envs);
  effects.length = 0;
  refusing.clear();
});

async function createEnv(options: Parameters<typeof CycloneTestEnv.create>[0] = {}): Promise<CycloneTestEnv> {
  const env = await CycloneTestEnv.create({ providers: [OrderSteps, OrderFlows], pollInterval: [20, 50], ...options });
  envs.push(env);
  return env;
}

describe('workflows written as code', () => {
  it('run a method of durable calls to completion, each recorded once, through passes that hold no worker while they wait', async () => {
    const env = await createEnv();
    const runId = await env.client.start('order', { id: 'o1', items: ['a', 'b', 'c'] });
    // Sent before the method reaches its wait: kept, and taken when it does.
    expect(await env.client.signal(runId, 'approval', { by: 'ann' })).toBe(false);
    const result = await env.client.result(runId, { timeout: 20_000 });
    expect(result).toEqual({ ok: true, total: 36, items: ['a', 'b', 'c'], approvedBy: 'ann', receipt: 'R-30' });

    // Each inline call ran once and each step once, whatever the passes replayed.
    expect(effects.filter((e) => e === 'price o1')).toHaveLength(1);
    expect(effects.filter((e) => e.startsWith('reserve ')).sort()).toEqual(['reserve a (reserve-0)', 'reserve b (reserve-1)', 'reserve c (reserve-2)']);
    expect(effects.filter((e) => e === 'receipt number')).toHaveLength(1);

    const steps = await env.client.listSteps(runId);
    expect(steps.map((s) => [s.nodeId, s.type, s.state])).toEqual([
      ['order', 'workflow', 'completed'],
      ['price', 'run', 'completed'],
      ['reserve-0', 'step', 'completed'],
      ['reserve-1', 'step', 'completed'],
      ['reserve-2', 'step', 'completed'],
      ['cool-off', 'sleep', 'completed'],
      ['approval', 'signal', 'completed'],
      ['receipt', 'child', 'completed'],
      [steps[8].nodeId, 'result', 'completed'],
      ['tax-v2', 'patch', 'completed'],
    ]);
    expect(steps[8].nodeId).toBe(steps[7].output);
    expect(steps[2].input).toEqual({ sku: 'a' });
    const run = await env.client.getRun(runId);
    expect(run).toMatchObject({ workflow: 'order', version: 1, state: 'completed', parentId: null });
    const child = await env.client.getRun(steps[7].output as string);
    expect(child).toMatchObject({ workflow: 'receipt', parentId: runId, state: 'completed' });
  });

  it('hands a failed step to the method as StepFailedError, which it may catch and compensate for', async () => {
    const env = await createEnv();
    refusing.add('b');
    const runId = await env.client.start('order', { id: 'o2', items: ['a', 'b'] });
    expect(await env.client.result(runId, { timeout: 20_000 })).toEqual({ ok: false, failed: 'reserve-1' });
    expect(effects.filter((e) => e.startsWith('release'))).toEqual(['release after reserve-1']);
  });

  it('deletes a finished run with all its nodes once its retention has passed; a child keeps its own', async () => {
    const env = await createEnv();
    const runId = await env.client.start('order', { id: 'o3', items: ['a'] }, { retention: '1ms' });
    await env.client.signal(runId, 'approval', { by: 'bo' });
    await env.client.result(runId, { timeout: 20_000 });
    const child = (await env.client.listSteps(runId)).find((s) => s.type === 'child')!.output as string;
    await waitFor('the child to complete', async () => (await env.client.getRun(child)).state === 'completed');
    expect(await env.app.get(RetentionSweeper).sweep()).toBe(1);
    await expect(env.client.getRun(runId)).rejects.toMatchObject({ code: 'run_not_found' });
    const { rows } = await env.app.get(CycloneDatabase).pool.query('SELECT count(*)::int AS n FROM cyclone_steps WHERE run_id = $1', [runId]);
    expect(rows[0].n).toBe(0);
    expect((await env.client.getRun(child)).state).toBe('completed');
  });

  it('fails the run at once when the method lets a recorded failure through, and carries it on when retried', async () => {
    @Injectable()
    class Strict {
      @Workflow('strict')
      async strict(_input: unknown, wf: WorkflowContext) {
        const r = await wf.step('only', Reserve, { sku: 'x' });
        return r.sku;
      }
    }
    const env = await CycloneTestEnv.create({ providers: [OrderSteps, Strict], pollInterval: [20, 50] });
    envs.push(env);
    refusing.add('x');
    const runId = await env.client.start('strict', null);
    const failure = await env.client.result(runId, { timeout: 20_000 }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(RunFailedError);
    const node = (await env.client.listSteps(runId)).find((s) => s.nodeId === 'strict')!;
    expect(node).toMatchObject({ state: 'discarded', errorKind: 'permanent', attempt: 1 });
    expect(node.error).toContain('Node "only"');

    refusing.clear();
    expect(await env.client.retryAll(runId)).toBe(2);
    expect(await env.client.result(runId, { timeout: 20_000 })).toBe('x');
    await waitFor('the run completed', async () => (await env.client.getRun(runId)).state === 'completed');
  });
});

/** Reads a run's workflow node: its state, lease and passes (its lease generation counts its claims). */
async function workflowNode(env: CycloneTestEnv, runId: string) {
  const { rows } = await env.app.get(CycloneDatabase).pool.query<{
    state: string;
    lease_owner: string | null;
    passes: number;
    depends_on: string[];
    wake_delay_ms: number | null;
  }>(
    `SELECT s.state, s.lease_owner, s.lease_generation::int AS passes, s.depends_on, s.wake_delay_ms
       FROM cyclone_steps s JOIN cyclone_runs r ON r.id = s.run_id AND s.node_id = r.workflow WHERE r.id = $1`,
    [runId],
  );
  return rows[0];
}

describe('replay', () => {
  /** Set by the test: the inline call 'b' returns only once step 'a' has completed. */
  let release: (() => Promise<unknown>) | undefined;

  @Injectable()
  class RaceFlow {
    constructor(private readonly database: CycloneDatabase) {}

    @Workflow('race')
    async race(_input: unknown, wf: WorkflowContext) {
      const a = wf.step('a', Reserve, { sku: 'a' }).then(() => 'a');
      const b = wf.run('b', async () => {
        await release?.();
        return 'b';
      });
      const first = await Promise.race([a, b]);
      await wf.run(`after-${first}`, () => {
        effects.push(`after ${first}`);
        return first;
      });
      await a;
      await wf.waitForSignal('done');
      return first;
    }
  }

  it('hands the method its results in the order the run learned of them, not the order they finished', async () => {
    const env = await CycloneTestEnv.create({ providers: [OrderSteps, RaceFlow], pollInterval: [20, 50] });
    envs.push(env);
    const pool = env.app.get(CycloneDatabase).pool;
    // Step 'a' completes first, while 'b' runs: the pass learns of 'b' (its own result) and races on it.
    release = () =>
      waitFor('step a to complete', async () => {
        const { rows } = await pool.query(`SELECT 1 FROM cyclone_steps WHERE node_id = 'a' AND state = 'completed'`);
        return rows.length > 0;
      });
    const runId = await env.client.start('race', null);
    await untilStates(env, runId, { done: 'waiting_signal' }, 'the wait for "done"');
    const finished = await pool.query<{ node_id: string; observed: number; finished_at: Date }>(
      `SELECT node_id, observed, finished_at FROM cyclone_steps WHERE run_id = $1 AND node_id IN ('a', 'b') ORDER BY node_id`,
      [runId],
    );
    const [a, b] = finished.rows;
    expect(a.finished_at.getTime()).toBeLessThan(b.finished_at.getTime());
    expect(b.observed).toBeLessThan(a.observed);

    // The replay after the signal sees both finished, and must take 'b' again.
    await env.client.signal(runId, 'done', null);
    expect(await env.client.result(runId, { timeout: 20_000 })).toBe('b');
    expect(effects.filter((e) => e.startsWith('after'))).toEqual(['after b']);
    expect((await workflowNode(env, runId)).passes).toBeGreaterThanOrEqual(2);
  });
});

describe('patches and versions', () => {
  let database: TestDatabase | undefined;
  afterEach(async () => {
    await closeAll(envs);
    await database?.drop();
    database = undefined;
  });

  @Injectable()
  class BeforePatch {
    @Workflow('patchy')
    async run(_input: unknown, wf: WorkflowContext) {
      await wf.run('a', () => effects.push('a'));
      await wf.run('b', () => effects.push('b'));
      await wf.waitForSignal('go');
      return 'old path';
    }
  }

  @Injectable()
  class AfterPatch {
    @Workflow('patchy')
    async run(_input: unknown, wf: WorkflowContext) {
      await wf.run('a', () => effects.push('a'));
      const patched = wf.patched('tax-v2');
      if (patched) await wf.run('tax', () => effects.push('tax'));
      await wf.run('b', () => effects.push('b'));
      await wf.waitForSignal('go');
      return patched ? 'new path' : 'old path';
    }
  }

  it('keeps a run that started before a patch on its old path, recorded once, and takes new runs down the new one', async () => {
    database = await TestDatabase.create(process.env.CYCLONE_TEST_DATABASE_URL!);
    const on = { databaseUrl: database.url, isolate: false, pollInterval: [20, 50] as [number, number] };
    const before = await CycloneTestEnv.create({ providers: [BeforePatch], ...on });
    envs.push(before);
    const oldRun = await before.client.start('patchy', null);
    await untilStates(before, oldRun, { go: 'waiting_signal' }, 'the old run to wait for "go"');
    await closeAll(envs);

    const after = await CycloneTestEnv.create({ providers: [AfterPatch], ...on });
    envs.push(after);
    const newRun = await after.client.start('patchy', null);
    await untilStates(after, newRun, { go: 'waiting_signal' }, 'the new run to wait for "go"');
    await after.client.signal(oldRun, 'go', null);
    await after.client.signal(newRun, 'go', null);
    expect(await after.client.result(oldRun, { timeout: 20_000 })).toBe('old path');
    expect(await after.client.result(newRun, { timeout: 20_000 })).toBe('new path');
    const patchOf = async (runId: string) => (await after.client.listSteps(runId)).find((s) => s.nodeId === 'tax-v2');
    expect(await patchOf(oldRun)).toMatchObject({ type: 'patch', output: false });
    expect(await patchOf(newRun)).toMatchObject({ type: 'patch', output: true });
    // 'a' and 'b' of each run once, 'tax' only in the new one.
    expect(effects.sort()).toEqual(['a', 'a', 'b', 'b', 'tax']);
  });

  function versioned(version: number) {
    @Injectable()
    class Versioned {
      @Workflow('versioned', { version })
      async run(_input: unknown, wf: WorkflowContext) {
        return { version: wf.version, ranBy: await wf.run('who', () => version) };
      }
    }
    return Versioned;
  }

  it('leaves a run started by a newer version to a client that has it, and says so in health', async () => {
    database = await TestDatabase.create(process.env.CYCLONE_TEST_DATABASE_URL!);
    const on = { databaseUrl: database.url, isolate: false, pollInterval: [20, 50] as [number, number] };
    const older = await CycloneTestEnv.create({ providers: [versioned(1)], imports: [CycloneHealthModule], ...on });
    const starter = await CycloneTestEnv.create({ providers: [versioned(2)], ...on, runWorkers: false });
    envs.push(older, starter);
    const runId = await starter.client.start('versioned', null);
    expect(await starter.client.getRun(runId)).toMatchObject({ version: 2 });
    // The older client's claim passes over it, however often it polls.
    const ticks = lastTickAt(older, 'cyclone:poll')!.getTime();
    await waitFor('three more poll ticks of the older client', async () => {
      const at = lastTickAt(older, 'cyclone:poll')!.getTime();
      return at > ticks + 3 * 20;
    });
    const claimed = await older.app.get(CycloneDatabase).query(CLAIM_WORKFLOWS, ['default', ['versioned'], [1], 10, 'probe', 1]);
    expect(claimed.rows).toEqual([]);
    expect(await workflowNode(older, runId)).toMatchObject({ state: 'available', passes: 0 });
    const health = (await older.app.get(CycloneHealthIndicator).isHealthy('cyclone')).cyclone as Record<string, any>;
    expect(health.workflows).toEqual({
      versions: { versioned: 1 },
      waitingForNewerVersion: [
        {
          workflow: 'versioned',
          version: 2,
          runs: 1,
          message: expect.stringMatching(/1 run\(s\) of workflow "versioned" were started by version 2, newer than this client's 1/),
        },
      ],
    });

    const newer = await CycloneTestEnv.create({ providers: [versioned(2)], ...on });
    envs.push(newer);
    expect(await newer.client.result(runId, { timeout: 20_000 })).toEqual({ version: 2, ranBy: 2 });
    // An older run goes to either: the newer client runs it as version 1 recorded it.
    const oldRun = await older.client.start('versioned', null);
    expect(await older.client.result(oldRun, { timeout: 20_000 })).toMatchObject({ version: 1 });
    expect(older.app.get(CycloneStats).clientId).not.toBe(newer.app.get(CycloneStats).clientId);
  });
});

describe('durable waits', () => {
  let inlineCalls = 0;

  @Injectable()
  class Waits {
    @Workflow('waits')
    async run(_input: unknown, wf: WorkflowContext) {
      const flaky = await wf.run(
        'flaky',
        ({ attempt }) => {
          inlineCalls += 1;
          if (attempt < 3) throw new Error(`attempt ${attempt} fails`);
          return attempt;
        },
        { maxAttempts: 3, backoff: () => 30 },
      );
      let timedOut = false;
      try {
        await wf.waitForSignal('never', { timeout: 50 });
      } catch (err) {
        timedOut = err instanceof StepFailedError && err.errorKind === 'signal_timeout';
      }
      const both = await Promise.race([
        wf.waitForSignal<string>('answer').then((v) => `signal ${v}`),
        wf.sleep('patience', '1h').then(() => 'timer'),
      ]);
      return { flaky, timedOut, both };
    }
  }

  it('retries an inline call after its backoff on a timer, times a signal wait out, and races a signal against a sleep', async () => {
    inlineCalls = 0;
    const env = await CycloneTestEnv.create({ providers: [Waits], pollInterval: [20, 50] });
    envs.push(env);
    const runId = await env.client.start('waits', null);
    await untilStates(env, runId, { answer: 'waiting_signal', patience: 'waiting_timer' }, 'the race');
    // Waiting, the workflow holds no worker.
    expect(await workflowNode(env, runId)).toMatchObject({ state: 'pending', lease_owner: null });
    await env.client.signal(runId, 'answer', 'yes');
    expect(await env.client.result(runId, { timeout: 20_000 })).toEqual({ flaky: 3, timedOut: true, both: 'signal yes' });
    expect(inlineCalls).toBe(3);
    const steps = await env.client.listSteps(runId);
    const flaky = steps.find((s) => s.nodeId === 'flaky')!;
    expect(flaky).toMatchObject({ type: 'run', state: 'completed', attempt: 3, maxAttempts: 3, error: null, output: 3 });
    // Each attempt of the inline call is kept, as a step's: the failed ones with their error and stack.
    expect(flaky.attempts.map((a) => [a.attempt, a.outcome, a.error ?? null])).toEqual([
      [1, 'retried', 'attempt 1 fails'],
      [2, 'retried', 'attempt 2 fails'],
      [3, 'completed', null],
    ]);
    expect(flaky.attempts[0].stack).toContain('attempt 1 fails');
    expect(flaky.attempts[0].worker).toBe(env.app.get(CycloneStats).clientId);
    // The workflow's own passes: each that ended waiting is kept as suspended, under the one
    // attempt it never consumed, and the last completed the run.
    const passes = steps.find((s) => s.type === 'workflow')!.attempts;
    expect(passes.length).toBeGreaterThanOrEqual(3);
    expect(passes.slice(0, -1).every((a) => a.outcome === 'suspended' && a.attempt === 1 && a.finishedAt !== null)).toBe(true);
    expect(passes.at(-1)).toMatchObject({ attempt: 1, outcome: 'completed', worker: env.app.get(CycloneStats).clientId });
  });
});

describe('children, cancel and pause', () => {
  const events: StepEvent[] = [];

  @Injectable()
  class Family {
    @Workflow('parent')
    async parent(input: { children: number }, wf: WorkflowContext) {
      const ids = await Promise.all(
        Array.from({ length: input.children }, (_, i) => wf.startChild(`child-${i}`, 'child', { i })),
      );
      const results: unknown[] = [];
      for (const id of ids) {
        try {
          results.push(await wf.result(id));
        } catch (err) {
          results.push(`failed: ${(err as StepFailedError).errorKind}`);
        }
      }
      return results;
    }

    @Workflow('child')
    async child(input: { i: number }, wf: WorkflowContext) {
      const word = await wf.waitForSignal<string>('word');
      return `${input.i}:${word}`;
    }

    @OnStepEvent('completed', 'parent')
    parentCompleted(event: StepEvent) {
      events.push(event);
    }
  }

  it('starts child runs, takes their results, hears of a cancelled one, and cancels the rest with the parent', async () => {
    events.length = 0;
    const env = await CycloneTestEnv.create({ providers: [Family], pollInterval: [20, 50] });
    envs.push(env);
    const runId = await env.client.start('parent', { children: 3 });
    const children = await waitFor('three children', async () => {
      const nodes = (await env.client.listSteps(runId)).filter((s) => s.type === 'child');
      return nodes.length === 3 ? nodes.map((n) => n.output as string) : undefined;
    });
    for (const child of children) await untilStates(env, child, { word: 'waiting_signal' }, `child ${child} to wait`);
    await env.client.signal(children[0], 'word', 'hello');
    expect(await env.client.cancel(children[1])).toBe(true);
    await untilStates(env, runId, { [children[1]]: 'discarded' }, 'the wait for the cancelled child');

    // Pausing the waiting parent: a child's finish does not start a pass until resume.
    expect(await env.client.pause(runId)).toBe(true);
    await env.client.signal(children[2], 'word', 'late');
    await waitFor('the third child to complete', async () => (await env.client.getRun(children[2])).state === 'completed');
    expect(await workflowNode(env, runId)).toMatchObject({ state: 'paused' });
    expect(await env.client.resume(runId)).toBe(true);
    expect(await env.client.result(runId, { timeout: 20_000 })).toEqual(['0:hello', 'failed: error', '2:late']);
    await waitFor('the completed event', async () => events.length === 1);
    expect(events[0]).toMatchObject({ runId, nodeId: 'parent', kind: 'parent', output: ['0:hello', 'failed: error', '2:late'] });

    // Cancelling a parent cancels its unfinished children.
    const second = await env.client.start('parent', { children: 2 });
    const kids = await waitFor('two children', async () => {
      const nodes = (await env.client.listSteps(second)).filter((s) => s.type === 'child');
      return nodes.length === 2 ? nodes.map((n) => n.output as string) : undefined;
    });
    expect(await env.client.cancel(second)).toBe(true);
    for (const kid of kids) expect((await env.client.getRun(kid)).state).toBe('cancelled');
    await expect(env.client.result(second)).rejects.toBeInstanceOf(RunCancelledError);
  });
});
