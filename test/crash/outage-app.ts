/**
 * An app for the server-restart test: everything of Cyclone that holds a
 * connection, busy at once. Workers claim the crash step, every maintenance
 * loop runs (a schedule ticks each second, metrics are sampled every 200 ms),
 * the LISTEN connection is open, and three loops of the app's own run beside
 * them: enqueues (single, many, and in a TypeORM transaction), health checks,
 * and reads (getRun, listSteps, result). Each loop catches what it awaits,
 * as an app's code does; whatever reaches `uncaughtException` or
 * `unhandledRejection` is the library's, and is sent to the test as
 * { type: 'uncaught', source, message, stack } (the handlers keep the
 * process alive, so every one is reported). Every 100 ms it sends
 * { type: 'progress', ... } with its counters; on { type: 'stop' } it closes
 * the app and exits 0. A start that fails sends { type: 'failed', code,
 * message } and exits 1. Settings as the crash worker's (CRASH_DATABASE_URL,
 * CRASH_LEASE_TTL_MS, CRASH_POLL_MIN_MS/MAX_MS, CRASH_SLOTS).
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { CycloneClient, CycloneDatabase, CycloneModule, CycloneStats } from 'cyclone-nestjs';
import { CycloneHealthIndicator, CycloneHealthModule } from 'cyclone-nestjs/health';
import { CycloneMetricsModule } from 'cyclone-nestjs/metrics';
import { CRASH_KIND, CrashSteps } from './crash-steps.js';
import { fleetWorkerOptions } from './worker-process.js';

export interface OutageProgress {
  type: 'progress';
  enqueued: number;
  refused: number;
  healthUp: number;
  healthDown: number;
  reads: number;
  readFailures: number;
  listenerConnected: boolean;
}

export interface OutageFailed {
  type: 'failed';
  /** The CycloneError's code, when the error has one. */
  code?: string;
  message: string;
}

export interface OutageUncaught {
  type: 'uncaught';
  source: 'uncaughtException' | 'unhandledRejection';
  message: string;
  stack?: string;
}

for (const source of ['uncaughtException', 'unhandledRejection'] as const) {
  process.on(source, (err: unknown) => {
    const report: OutageUncaught = { type: 'uncaught', source, message: String((err as Error)?.message ?? err), stack: (err as Error)?.stack };
    process.send?.(report);
  });
}

@Module({
  imports: [
    CycloneModule.forRoot({ ...fleetWorkerOptions('outage-app'), schedules: [{ name: 'outage_tick', cron: '* * * * * *', kind: CRASH_KIND, input: { i: -1, ms: 10 } }] }),
    CycloneHealthModule,
    CycloneMetricsModule.forRoot({ sampleInterval: '200ms' }),
  ],
  providers: [CrashSteps],
})
class OutageAppModule {}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(OutageAppModule, { logger: false, abortOnError: false });
  const client = app.get(CycloneClient);
  const dataSource = app.get(CycloneDatabase).dataSource;
  const indicator = app.get(CycloneHealthIndicator);
  const stats = app.get(CycloneStats);
  const counts = { enqueued: 0, refused: 0, healthUp: 0, healthDown: 0, reads: 0, readFailures: 0 };
  let running = true;
  let lastRunId: string | undefined;

  const enqueueLoop = async () => {
    for (let i = 0; running; i++) {
      const input = { i, ms: 50 + (i % 5) * 40 };
      try {
        if (i % 3 === 0) lastRunId = await client.enqueue(CRASH_KIND, input);
        else if (i % 3 === 1) await client.enqueueMany(CRASH_KIND, [input, { ...input, i: -i }]);
        else await dataSource.transaction((manager) => client.enqueueTx(manager, CRASH_KIND, input));
        counts.enqueued += 1;
      } catch {
        counts.refused += 1;
      }
      await pause(20);
    }
  };
  const healthLoop = async () => {
    while (running) {
      try {
        const result = await indicator.isHealthy('cyclone', { timeout: 500 });
        if (result.cyclone.status === 'up') counts.healthUp += 1;
        else counts.healthDown += 1;
      } catch {
        counts.healthDown += 1;
      }
      await pause(50);
    }
  };
  const readLoop = async () => {
    while (running) {
      const runId = lastRunId;
      try {
        if (runId) {
          await client.getRun(runId);
          await client.listSteps(runId);
          await client.result(runId, { timeout: '300ms' }).catch((err: { code?: string }) => {
            if (err?.code !== 'result_timeout') throw err;
          });
        }
        counts.reads += 1;
      } catch {
        counts.readFailures += 1;
      }
      await pause(50);
    }
  };
  const loops = Promise.all([enqueueLoop(), healthLoop(), readLoop()]);
  const reporter = setInterval(() => {
    const progress: OutageProgress = { type: 'progress', ...counts, listenerConnected: stats.listenerConnected() };
    process.send?.(progress);
  }, 100);

  process.on('message', (msg: { type?: string }) => {
    if (msg?.type !== 'stop') return;
    running = false;
    void loops
      .then(() => app.close())
      .then(() => {
        clearInterval(reporter);
        process.exit(0);
      });
  });
  process.on('disconnect', () => process.exit(0));
  process.send?.({ type: 'ready', pid: process.pid, owner: stats.clientId });
}

main().catch((err: unknown) => {
  const failed: OutageFailed = { type: 'failed', code: (err as { code?: string })?.code, message: String((err as Error)?.message ?? err) };
  process.stderr.write(`outage-app ${process.pid} failed to start: ${failed.message}\n`);
  if (process.send) process.send(failed, () => process.exit(1));
  else process.exit(1);
});
