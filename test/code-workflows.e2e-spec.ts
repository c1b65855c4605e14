import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import {
  PermanentError,
  RunFailedError,
  Step,
  StepFailedError,
  Workflow,
  defineStep,
  defineWorkflow,
  type StepContext,
  type WorkflowContext,
} from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { closeAll } from './support/handler-probe.js';
import { waitFor } from './support/wait.js';

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
