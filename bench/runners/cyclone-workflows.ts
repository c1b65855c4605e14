import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import {
  CycloneClient,
  CycloneModule,
  Step,
  Workflow,
  defineStep,
  defineWorkflow,
  type WorkflowContext,
  type WorkflowDefinition,
} from 'cyclone-nestjs';
import { cyclonePoolSize } from './types.js';

/** The work of W11, as each system runs it: `chain` runs of a workflow of `stepsPerRun` steps, and a fan-out. */
export interface W11Driver {
  describe: string;
  /** Starts `runs` runs of the chain and resolves once every one has completed. */
  chain(runs: number): Promise<void>;
  /** Runs one workflow of `fanOut` steps at once, to completion. */
  fanOut(): Promise<void>;
  stop(): Promise<void>;
}

export interface W11Shape {
  stepsPerRun: number;
  fanOut: number;
  workers: number;
}

const BenchStep = defineStep<{ k: number }, number>('w11_step');

/**
 * Cyclone's forms of the work: `code`, a workflow written as code whose
 * steps alternate between an inline call (wf.run) and a step of its own
 * (wf.step), its fan-out a Promise.all of wf.step; `dag`, the same steps all
 * as step nodes of a chain, its fan-out as many independent nodes; `inline`,
 * a workflow of inline calls only, to count what a recorded inline call
 * costs.
 */
export async function startCycloneW11(url: string, form: 'code' | 'dag' | 'inline', shape: W11Shape): Promise<W11Driver> {
  const chain = Array.from({ length: shape.stepsPerRun }, (_, k) => k).reduce(
    (def, k) => def.step(`s${k}`, BenchStep, k === 0 ? {} : { after: [`s${k - 1}`] }),
    defineWorkflow('w11_dag_chain'),
  );
  const wide = Array.from({ length: shape.fanOut }, (_, k) => k).reduce(
    (def, k) => def.step(`s${k}`, BenchStep),
    defineWorkflow('w11_dag_fan_out'),
  );

  @Injectable()
  class W11Flows {
    /** A DAG's nodes get the run's input; a code workflow's steps their own. */
    @Step(BenchStep)
    async step(input: { k?: number } | null) {
      return input?.k ?? 0;
    }

    @Workflow('w11_code_chain')
    async codeChain(input: { steps: number }, wf: WorkflowContext) {
      let sum = 0;
      for (let k = 0; k < input.steps; k++) {
        sum += k % 2 === 0 ? await wf.run(`inline-${k}`, () => k) : await wf.step(`step-${k}`, BenchStep, { k });
      }
      return sum;
    }

    @Workflow('w11_inline_chain')
    async inlineChain(input: { steps: number }, wf: WorkflowContext) {
      let sum = 0;
      for (let k = 0; k < input.steps; k++) sum += await wf.run(`inline-${k}`, () => k);
      return sum;
    }

    @Workflow('w11_code_fan_out')
    async codeFanOut(input: { n: number }, wf: WorkflowContext) {
      const all = await Promise.all(Array.from({ length: input.n }, (_, k) => wf.step(`step-${k}`, BenchStep, { k })));
      return all.length;
    }
  }

  @Module({
    imports: [
      CycloneModule.forRoot({
        connection: { url },
        queues: { default: { workers: shape.workers } },
        tracing: false,
        workflows: form === 'dag' ? [chain, wide] : [],
      }),
    ],
    providers: [W11Flows],
  })
  class W11Module {}

  const app = await NestFactory.createApplicationContext(W11Module, { logger: ['error', 'warn'] });
  const client = app.get(CycloneClient);
  const check = new pg.Client({ connectionString: url, application_name: 'bench' });
  await check.connect();
  const untilCompleted = async (ids: string[]) => {
    for (;;) {
      const { rows } = await check.query(
        `/* bench */ SELECT count(*) FILTER (WHERE state = 'completed')::int AS bench_done,
                count(*) FILTER (WHERE state IN ('failed', 'cancelled'))::int AS bench_failed
           FROM cyclone_runs WHERE id = ANY ($1::uuid[])`,
        [ids],
      );
      if (rows[0].bench_failed > 0) throw new Error(`${rows[0].bench_failed} W11 run(s) failed`);
      if (rows[0].bench_done === ids.length) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  const chainTarget: WorkflowDefinition<any> | string =
    form === 'dag' ? chain : form === 'code' ? 'w11_code_chain' : 'w11_inline_chain';
  return {
    describe:
      `CycloneModule.forRoot({ connection: { url }, queues: { default: { workers: ${shape.workers} } }, tracing: false }) ` +
      `(pool ${cyclonePoolSize(shape.workers)} connections + 1 LISTEN); ` +
      (form === 'code'
        ? `a @Workflow of ${shape.stepsPerRun} calls alternating wf.run and wf.step; fan-out: Promise.all of ${shape.fanOut} wf.step`
        : form === 'dag'
          ? `defineWorkflow: a chain of ${shape.stepsPerRun} step nodes; fan-out: ${shape.fanOut} independent step nodes`
          : `a @Workflow of ${shape.stepsPerRun} sequential wf.run calls`),
    chain: async (runs) => {
      const ids: string[] = [];
      let next = 0;
      // 16 callers start the runs, as W2's enqueue does.
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next < runs) {
            next += 1;
            ids.push(await client.start(chainTarget, { steps: shape.stepsPerRun }));
          }
        }),
      );
      await untilCompleted(ids);
    },
    fanOut: async () => {
      const id = form === 'dag' ? await client.start(wide, null) : await client.start('w11_code_fan_out', { n: shape.fanOut });
      await untilCompleted([id]);
    },
    stop: async () => {
      await check.end();
      await app.close();
    },
  };
}
