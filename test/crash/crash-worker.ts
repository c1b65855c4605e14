/**
 * A worker process for the crash tests: a Nest application context running
 * CycloneModule with short timings and the crash step. The tests run the
 * compiled file (`node .build/test/crash/crash-worker.js`, built by `pretest`)
 * as a child with an IPC channel; it reports { type: 'ready', pid, owner }
 * once its workers run, and exits when the channel closes, so a test runner
 * that dies leaves no worker behind.
 *
 * Settings (environment): CRASH_DATABASE_URL (required), CRASH_LEASE_TTL_MS
 * (default 800), CRASH_POLL_MIN_MS / CRASH_POLL_MAX_MS (default 50 / 200),
 * CRASH_SLOTS (default 3), CRASH_REPORT_PASSES (default false; see WorkerFleet), CRASH_MIGRATIONS_RUN (default true; `false` for a
 * worker of a schema another version migrated), CRASH_STATEMENT_TIMEOUT_MS
 * (default 30 s).
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { CycloneModule } from 'cyclone-nestjs';
import { BackoffSteps, HangFlow } from './backoff-steps.js';
import { CrashSteps } from './crash-steps.js';
import { PickupSteps } from './pickup-steps.js';
import { fleetWorkerOptions, setting, startWorkerProcess } from './worker-process.js';

@Module({
  imports: [
    CycloneModule.forRoot({
      ...fleetWorkerOptions('crash-worker'),
      migrationsRun: process.env.CRASH_MIGRATIONS_RUN !== 'false',
      statementTimeout: setting('CRASH_STATEMENT_TIMEOUT_MS', 30_000),
      workflows: [HangFlow],
    }),
  ],
  providers: [CrashSteps, BackoffSteps, PickupSteps],
})
class CrashWorkerModule {}

startWorkerProcess(CrashWorkerModule, 'crash-worker');
