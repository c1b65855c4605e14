/**
 * A worker process for the broker dispatch fault tests: CycloneModule with
 * the fault steps (dispatch-steps.ts) and broker dispatch on (CRASH_DISPATCH,
 * the `dispatch` option as JSON). Spawned by WorkerFleet from its compiled
 * file (.build/test/crash/dispatch-worker.js); other settings as the crash
 * worker's (CRASH_DATABASE_URL, CRASH_LEASE_TTL_MS, CRASH_POLL_MIN_MS /
 * MAX_MS, CRASH_SLOTS).
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { CycloneModule } from 'cyclone-nestjs';
import { DispatchFaultSteps } from './dispatch-steps.js';
import { fleetWorkerOptions, startWorkerProcess } from './worker-process.js';

@Module({
  imports: [CycloneModule.forRoot(fleetWorkerOptions('dispatch-worker'))],
  providers: [DispatchFaultSteps],
})
class DispatchWorkerModule {}

startWorkerProcess(DispatchWorkerModule, 'dispatch-worker');
