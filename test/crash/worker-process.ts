/**
 * What the worker processes WorkerFleet spawns share: settings from the
 * environment, and the start: the app comes up, reports
 * { type: 'ready', pid, owner }, then, with CRASH_REPORT_PASSES=true,
 * { type: 'pass', loop, queue?, failed } as each pass of its loops ends (the
 * test kit's waitForPasses, across the process boundary), and the process
 * exits when the test's IPC channel closes. With CRASH_DISPATCH set (the
 * `dispatch` option as JSON), the worker runs with broker dispatch on (SPEC §17).
 */
import { NestFactory } from '@nestjs/core';
import { CycloneStats, type CycloneModuleOptions } from 'cyclone-nestjs';

/** CRASH_DATABASE_URL, or the process exits naming it. */
function workerDatabaseUrl(script: string): string {
  const url = process.env.CRASH_DATABASE_URL;
  if (!url) {
    process.stderr.write(`${script}: CRASH_DATABASE_URL is not set\n`);
    process.exit(2);
  }
  return url;
}

/** A number from the environment, or the fallback. */
export const setting = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);

/** The options every fleet worker shares: its database, lease, polling and slots from the environment. */
export function fleetWorkerOptions(script: string): CycloneModuleOptions {
  return {
    connection: { url: workerDatabaseUrl(script) },
    leaseTtl: setting('CRASH_LEASE_TTL_MS', 800),
    pollInterval: [setting('CRASH_POLL_MIN_MS', 50), setting('CRASH_POLL_MAX_MS', 200)],
    queues: { default: { workers: setting('CRASH_SLOTS', 3) } },
    shutdownTimeout: 1_000,
    ...(process.env.CRASH_DISPATCH ? { dispatch: JSON.parse(process.env.CRASH_DISPATCH) as CycloneModuleOptions['dispatch'] } : {}),
  };
}

export function startWorkerProcess(module: object, script: string): void {
  const main = async (): Promise<void> => {
    process.on('disconnect', () => process.exit(0));
    const app = await NestFactory.createApplicationContext(module, { logger: ['error', 'warn'] });
    const stats = app.get(CycloneStats);
    if (process.env.CRASH_REPORT_PASSES === 'true') {
      stats.events.observe({
        passEnded: ({ loop, queue, error }) => process.send?.({ type: 'pass', loop, queue, failed: error !== undefined }),
      });
    }
    process.send?.({ type: 'ready', pid: process.pid, owner: stats.clientId });
  };
  main().catch((err: unknown) => {
    process.stderr.write(`${script} ${process.pid} failed to start: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  });
}
