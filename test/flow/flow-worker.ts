/**
 * A worker process for the flow-control and schedule tests: CycloneModule
 * with a step limited to one running at a time cluster-wide (`held_slot`,
 * whose handler takes FLOW_HOLD_MS) and a schedule of `scheduled_tick` on
 * FLOW_CRON (when set). Spawned by WorkerFleet from its compiled file
 * (.build/test/flow/flow-worker.js); reports { type: 'ready', pid, owner }
 * and exits when the test's IPC channel closes. Settings as the crash worker's
 * (CRASH_DATABASE_URL, CRASH_LEASE_TTL_MS, CRASH_POLL_MIN_MS/MAX_MS, CRASH_SLOTS).
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { CycloneModule, Step, type StepContext } from 'cyclone-nestjs';
import { fleetWorkerOptions, setting, startWorkerProcess } from '../crash/worker-process.js';

export const HELD_SLOT_KIND = 'held_slot';
export const SCHEDULED_KIND = 'scheduled_tick';

@Injectable()
class FlowWorkerSteps {
  @Step(HELD_SLOT_KIND, { concurrency: { limit: 1 } })
  async hold(_input: unknown, ctx: StepContext): Promise<{ pid: number; attempt: number; reclaims: number }> {
    await new Promise((resolve) => setTimeout(resolve, setting('FLOW_HOLD_MS', 60_000)));
    return { pid: process.pid, attempt: ctx.attempt, reclaims: ctx.reclaims };
  }

  @Step(SCHEDULED_KIND)
  async tick(): Promise<{ pid: number }> {
    return { pid: process.pid };
  }
}

@Module({
  imports: [
    CycloneModule.forRoot({
      ...fleetWorkerOptions('flow-worker'),
      schedules: process.env.FLOW_CRON ? [{ name: 'fleet_tick', cron: process.env.FLOW_CRON, kind: SCHEDULED_KIND }] : [],
    }),
  ],
  providers: [FlowWorkerSteps],
})
class FlowWorkerModule {}

startWorkerProcess(FlowWorkerModule, 'flow-worker');
