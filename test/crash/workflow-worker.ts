/**
 * A worker process for the code workflow crash tests: CycloneModule with the
 * crash flow and its step (workflow-steps.ts). Spawned by WorkerFleet from
 * its compiled file (.build/test/crash/workflow-worker.js); settings as the
 * crash worker's (CRASH_DATABASE_URL, CRASH_LEASE_TTL_MS, CRASH_POLL_MIN_MS /
 * MAX_MS, CRASH_SLOTS).
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { CycloneModule } from 'cyclone-nestjs';
import { CrashFlowSteps } from './workflow-steps.js';
import { fleetWorkerOptions, startWorkerProcess } from './worker-process.js';

@Module({
  imports: [CycloneModule.forRoot(fleetWorkerOptions('workflow-worker'))],
  providers: [CrashFlowSteps],
})
class WorkflowWorkerModule {}

startWorkerProcess(WorkflowWorkerModule, 'workflow-worker');
