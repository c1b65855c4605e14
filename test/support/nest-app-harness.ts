import type { DynamicModule, INestApplicationContext, LoggerService, LogLevel, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { CycloneStats } from 'cyclone-nestjs';
import { TestDatabase, type LoopName } from 'cyclone-nestjs/testing';

/** The server the jest global setup started (or the one the environment gave). */
export function testServerUrl(): string {
  const url = process.env.CYCLONE_TEST_DATABASE_URL;
  if (!url) throw new Error('CYCLONE_TEST_DATABASE_URL is not set: run these tests through jest (global setup).');
  return url;
}

/** Counts the passes of `loop` (of every loop, when undefined) that the app's engine ends from now on. */
export function passesOf(app: INestApplicationContext, loop: LoopName | undefined): () => number {
  let passes = 0;
  app.get(CycloneStats).events.observe({
    passEnded: (pass) => {
      if (loop === undefined || pass.loop === loop) passes += 1;
    },
  });
  return () => passes;
}

/**
 * Nest apps and databases a test creates itself (with NestFactory, as a user
 * would), closed and dropped in `cleanup()` whatever the test did.
 */
export class AppHarness {
  private apps: INestApplicationContext[] = [];
  private databases: TestDatabase[] = [];
  private cleanups: (() => Promise<unknown>)[] = [];

  async database(): Promise<TestDatabase> {
    const database = await TestDatabase.create(testServerUrl());
    this.databases.push(database);
    return database;
  }

  /** Starts an application context; a startup failure is thrown, as NestFactory throws it. */
  async start(
    module: Type | DynamicModule,
    logger: LogLevel[] | LoggerService | false = ['error'],
  ): Promise<INestApplicationContext> {
    const app = await NestFactory.createApplicationContext(module, { logger, abortOnError: false });
    this.apps.push(app);
    return app;
  }

  /** Closes an app now (it is not closed again in cleanup). */
  async close(app: INestApplicationContext): Promise<void> {
    this.apps = this.apps.filter((a) => a !== app);
    await app.close();
  }

  /** Runs `fn` in cleanup, before databases are dropped. */
  defer(fn: () => Promise<unknown>): void {
    this.cleanups.push(fn);
  }

  async cleanup(): Promise<void> {
    const errors: unknown[] = [];
    for (const app of this.apps.reverse()) await app.close().catch((err) => errors.push(err));
    for (const fn of this.cleanups.reverse()) await fn().catch((err) => errors.push(err));
    for (const db of this.databases) await db.drop().catch((err) => errors.push(err));
    this.apps = [];
    this.cleanups = [];
    this.databases = [];
    if (errors.length > 0) throw errors[0];
  }
}

/** Keeps the messages Nest loggers write, to check what Cyclone reported. */
export class CapturingLogger implements LoggerService {
  readonly messages: string[] = [];
  log(message: unknown) {
    this.messages.push(String(message));
  }
  error(message: unknown) {
    this.messages.push(String(message));
  }
  warn(message: unknown) {
    this.messages.push(String(message));
  }
}

/** Counts handler calls running at once, and the most seen together. */
export class ConcurrencyProbe {
  running = 0;
  peak = 0;
  calls = 0;

  async around<T>(fn: () => Promise<T>): Promise<T> {
    this.calls += 1;
    this.running += 1;
    this.peak = Math.max(this.peak, this.running);
    try {
      return await fn();
    } finally {
      this.running -= 1;
    }
  }
}
