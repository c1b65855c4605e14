import { DBOS, type WorkflowHandle } from '@dbos-inc/dbos-sdk';
import type { W11Driver, W11Shape } from '../runners/cyclone-workflows.js';
import { peerVersion } from './version.js';

const VERSION = peerVersion('@dbos-inc/dbos-sdk');
const QUEUE = 'w11';

/**
 * DBOS Transact's form of W11: workflows enqueued on a DBOS queue (worker
 * concurrency as Cyclone's workers), each of `stepsPerRun` steps
 * (DBOS.runStep, run in the workflow's process and checkpointed); the
 * fan-out a workflow that enqueues as many child workflows of one step each
 * on the queue and waits for all of them (a DBOS step runs in its workflow's
 * process, so a fan-out over the queue's workers is a fan-out of child
 * workflows). Its system database is the run's database.
 */
export async function startDbosW11(url: string, shape: W11Shape): Promise<W11Driver> {
  const chain = DBOS.registerWorkflow(
    async (steps: number) => {
      let sum = 0;
      for (let k = 0; k < steps; k++) sum += await DBOS.runStep(async () => k, { name: `step-${k}` });
      return sum;
    },
    { name: 'w11_chain' },
  );
  const one = DBOS.registerWorkflow(async (k: number) => DBOS.runStep(async () => k, { name: 'step' }), { name: 'w11_one' });
  const fanOut = DBOS.registerWorkflow(
    async (n: number) => {
      const handles: WorkflowHandle<number>[] = [];
      for (let k = 0; k < n; k++) handles.push(await DBOS.startWorkflow(one, { queueName: QUEUE })(k));
      let sum = 0;
      for (const handle of handles) sum += await handle.getResult();
      return sum;
    },
    { name: 'w11_fan_out' },
  );
  DBOS.setConfig({
    name: 'cyclone-bench',
    applicationVersion: 'bench',
    systemDatabaseUrl: url,
    systemDatabasePoolSize: Math.min(10 + Math.ceil(shape.workers / 4) + 1, 50),
    logLevel: 'error',
  });
  await DBOS.launch();
  await DBOS.registerQueue(QUEUE, { workerConcurrency: shape.workers, onConflict: 'always_update' });
  return {
    describe:
      `@dbos-inc/dbos-sdk ${VERSION}: DBOS.registerQueue('${QUEUE}', { workerConcurrency: ${shape.workers} }), ` +
      `workflows of ${shape.stepsPerRun} DBOS.runStep enqueued with DBOS.startWorkflow(..., { queueName }); ` +
      `fan-out: a workflow that enqueues ${shape.fanOut} child workflows of one step and awaits them`,
    chain: async (runs) => {
      const handles: WorkflowHandle<number>[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next < runs) {
            next += 1;
            handles.push(await DBOS.startWorkflow(chain, { queueName: QUEUE })(shape.stepsPerRun));
          }
        }),
      );
      for (const handle of handles) await handle.getResult();
    },
    fanOut: async () => {
      const handle = await DBOS.startWorkflow(fanOut)(shape.fanOut);
      await handle.getResult();
    },
    stop: () => DBOS.shutdown(),
  };
}
