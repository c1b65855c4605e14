/**
 * An app on the embedded PostgreSQL, for the embedded-server tests: no
 * database URL, so CycloneModule starts the server itself in
 * CYCLONE_EMBEDDED_DIR on CYCLONE_EMBEDDED_PORT. The tests run the compiled
 * file (`node .build/test/embedded/embedded-app.js`). It prints one JSON line
 * per event on stdout: { event: 'ready' }, then { event: 'started', runId }
 * when its slow step is running. With EMBEDDED_SHUTDOWN_HOOKS=1 it enables
 * Nest's shutdown hooks.
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { CycloneClient, CycloneModule, Step } from 'cyclone-nestjs';

const say = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);

@Injectable()
class SlowSteps {
  @Step('slow')
  async slow(input: { ms: number }, ctx: { runId: string }): Promise<{ slept: number }> {
    say({ event: 'started', runId: ctx.runId });
    await new Promise((resolve) => setTimeout(resolve, input.ms));
    return { slept: input.ms };
  }
}

@Module({
  imports: [CycloneModule.forRoot({ pollInterval: [50, 200], shutdownTimeout: 10_000 })],
  providers: [SlowSteps],
})
class EmbeddedAppModule {}

const app = await NestFactory.createApplicationContext(EmbeddedAppModule, { logger: ['error', 'warn', 'log'] });
if (process.env.EMBEDDED_SHUTDOWN_HOOKS === '1') app.enableShutdownHooks();
say({ event: 'ready' });
await app.get(CycloneClient).enqueue('slow', { ms: Number(process.env.EMBEDDED_STEP_MS ?? 1_500) });
