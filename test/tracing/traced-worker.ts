/**
 * A worker process for the two-process tracing test: the app's OpenTelemetry
 * setup (in-memory exporter, W3C propagator) and CycloneModule running the
 * traced step. The test runs the compiled file (`node
 * .build/test/tracing/traced-worker.js`, built by `pretest`) with an IPC
 * channel: it reports { type: 'ready' } once its workers run, then every span
 * as it ends ({ type: 'span', span }), and exits when the channel closes.
 *
 * Settings (environment): TRACED_DATABASE_URL (required).
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { CycloneModule } from 'cyclone-nestjs';
import { installTracing } from '../support/tracing.js';
import { TracedSteps } from './traced-steps.js';

const url = process.env.TRACED_DATABASE_URL;
if (!url) {
  process.stderr.write('traced-worker: TRACED_DATABASE_URL is not set\n');
  process.exit(2);
}
installTracing((span) => process.send?.({ type: 'span', span }));

@Module({
  imports: [CycloneModule.forRoot({ connection: { url }, pollInterval: [50, 200], queues: { default: { workers: 2 } } })],
  providers: [TracedSteps],
})
class TracedWorkerModule {}

async function main(): Promise<void> {
  process.on('disconnect', () => process.exit(0));
  await NestFactory.createApplicationContext(TracedWorkerModule, { logger: ['error', 'warn'] });
  process.send?.({ type: 'ready', pid: process.pid });
}

main().catch((err: unknown) => {
  process.stderr.write(`traced-worker ${process.pid} failed to start: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
