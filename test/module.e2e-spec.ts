import { describe, it, expect, afterEach } from '@jest/globals';
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { Cron, Interval, ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { DataSource } from 'typeorm';
import {
  CycloneClient,
  CycloneDatabase,
  CycloneModule,
  Step,
  CycloneStats,
  type CycloneModuleOptions,
} from 'cyclone-nestjs';
import { waitForPasses } from 'cyclone-nestjs/testing';
import { AppHarness, CapturingLogger, ConcurrencyProbe, passesOf } from './support/nest-app-harness.js';
import { sleep, waitFor } from './support/wait.js';
import { sql } from './support/sql.js';

const harness = new AppHarness();
afterEach(() => harness.cleanup());

const FAST_POLL: CycloneModuleOptions['pollInterval'] = [50, 200];

/** Which app ran a job, so a test can tell replicas apart. */
const ranBy: string[] = [];
afterEach(() => void (ranBy.length = 0));

function stepsTagged(tag: string) {
  @Injectable()
  class TaggedSteps {
    @Step('tagged')
    async run(input: { i: number }) {
      ranBy.push(tag);
      return { by: tag, i: input.i };
    }
  }
  return TaggedSteps;
}

function slowSteps(probe: ConcurrencyProbe, ms = 300) {
  @Injectable()
  class SlowSteps {
    @Step('slow')
    async run(input: { i: number }) {
      return probe.around(async () => {
        await sleep(ms);
        return input.i;
      });
    }
  }
  return SlowSteps;
}

function hostsWithWorkers(app: INestApplicationContext): CycloneStats[] {
  return app.get(CycloneStats, { each: true }).filter((stats) => stats.runsWorkers);
}

/** An app on `url` whose `tagged` handler reports `tag`, polling fast. */
function taggedModule(url: string, tag: string, options: CycloneModuleOptions = {}) {
  @Module({
    imports: [CycloneModule.forRoot({ connection: { url }, pollInterval: FAST_POLL, ...options })],
    providers: [stepsTagged(tag)],
  })
  class TaggedModule {}
  return TaggedModule;
}

describe('CycloneModule.forRoot / forRootAsync', () => {
  it('forRoot: CycloneClient is injectable in an app service (also in a feature module) and jobs run', async () => {
    const db = await harness.database();
    const Steps = stepsTagged('app');

    @Injectable()
    class SignupService {
      constructor(readonly client: CycloneClient) {}
      async signUp(i: number) {
        return this.client.enqueue('tagged', { i });
      }
    }

    @Module({ providers: [SignupService], exports: [SignupService] })
    class SignupModule {}

    @Module({
      imports: [CycloneModule.forRoot({ connection: { url: db.url }, pollInterval: FAST_POLL }), SignupModule],
      providers: [Steps],
    })
    class AppModule {}

    const app = await harness.start(AppModule);
    const service = app.get(SignupService);
    expect(service.client).toBe(app.get(CycloneClient));
    const runId = await service.signUp(7);
    await expect(app.get(CycloneClient).result(runId, { timeout: 10_000 })).resolves.toEqual({ by: 'app', i: 7 });
  });

  it('forRootAsync: options come from a provider of an imported config module', async () => {
    const db = await harness.database();
    const probe = new ConcurrencyProbe();

    @Injectable()
    class AppConfig {
      readonly databaseUrl = db.url;
      readonly workers = 3;
    }

    @Module({ providers: [AppConfig], exports: [AppConfig] })
    class AppConfigModule {}

    @Module({
      imports: [
        CycloneModule.forRootAsync({
          imports: [AppConfigModule],
          inject: [AppConfig],
          useFactory: (config: AppConfig): CycloneModuleOptions => ({
            connection: { url: config.databaseUrl },
            queues: { default: { workers: config.workers } },
            pollInterval: FAST_POLL,
          }),
        }),
      ],
      providers: [slowSteps(probe)],
    })
    class AppModule {}

    const app = await harness.start(AppModule);
    expect(app.get(CycloneStats).servedQueues.get('default')).toBe(3);

    const client = app.get(CycloneClient);
    const ids = await client.enqueueMany('slow', [1, 2, 3, 4, 5, 6, 7].map((i) => ({ i })));
    const outputs = await Promise.all(ids.map((id) => client.result(id, { timeout: 15_000 })));
    expect(outputs).toEqual([1, 2, 3, 4, 5, 6, 7]);
    // Exactly the configured concurrency: never more, and it was used.
    expect(probe.peak).toBe(3);
    // The configured database is the one used.
    const [{ n }] = await sql(db.url, 'SELECT count(*)::int AS n FROM cyclone_runs');
    expect(n).toBe(7);
  });

  describe('imported more than once in one app', () => {
    async function runSlowJobs(app: INestApplicationContext, count: number): Promise<void> {
      const client = app.get(CycloneClient);
      const ids = await client.enqueueMany('slow', Array.from({ length: count }, (_, i) => ({ i })));
      await Promise.all(ids.map((id) => client.result(id, { timeout: 15_000 })));
    }

    it('with the same options, starts one set of workers', async () => {
      const db = await harness.database();
      const probe = new ConcurrencyProbe();
      const options: CycloneModuleOptions = {
        connection: { url: db.url },
        queues: { default: { workers: 2 } },
        pollInterval: FAST_POLL,
      };

      @Module({ imports: [CycloneModule.forRoot(options)] })
      class OrdersModule {}

      @Module({ imports: [CycloneModule.forRoot({ ...options })] })
      class BillingModule {}

      @Module({ imports: [OrdersModule, BillingModule], providers: [slowSteps(probe)] })
      class AppModule {}

      const app = await harness.start(AppModule);
      expect(hostsWithWorkers(app)).toHaveLength(1);
      await runSlowJobs(app, 6);
      expect(probe.calls).toBe(6);
      expect(probe.peak).toBe(2);
    });

    it('says once, naming the importing modules, that the first import runs the workers, and how to import it once', async () => {
      const db = await harness.database();
      const options: CycloneModuleOptions = { connection: { url: db.url }, pollInterval: FAST_POLL };
      @Module({ imports: [CycloneModule.forRoot(options)] })
      class OrdersModule {}
      @Module({ imports: [CycloneModule.forRoot(options)] })
      class BillingModule {}
      @Module({ imports: [OrdersModule, BillingModule], providers: [slowSteps(new ConcurrencyProbe())] })
      class AppModule {}

      const logger = new CapturingLogger();
      await harness.start(AppModule, logger);
      const warnings = logger.messages.filter((m) => m.includes('imported more than once'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain('(by OrdersModule, BillingModule)');
      expect(warnings[0]).toContain('The import that started first runs the workers');
      expect(warnings[0]).toContain('Import CycloneModule.forRoot() once, in the root module');
    });

    it('with different options, still starts one set of workers', async () => {
      const db = await harness.database();
      const probe = new ConcurrencyProbe();

      @Module({
        imports: [
          CycloneModule.forRoot({ connection: { url: db.url }, queues: { default: { workers: 2 } }, pollInterval: FAST_POLL }),
        ],
      })
      class OrdersModule {}

      @Module({
        imports: [
          CycloneModule.forRoot({ connection: { url: db.url }, queues: { default: { workers: 3 } }, pollInterval: [60, 250] }),
        ],
      })
      class BillingModule {}

      @Module({ imports: [OrdersModule, BillingModule], providers: [slowSteps(probe)] })
      class AppModule {}

      const app = await harness.start(AppModule);
      const active = hostsWithWorkers(app);
      expect(active).toHaveLength(1);
      const slots = active[0].servedQueues.get('default')!;

      await runSlowJobs(app, 8);
      expect(probe.calls).toBe(8);
      expect(probe.peak).toBeLessThanOrEqual(slots);
      // Each job ran exactly once.
      const rows = await sql(db.url, `SELECT count(*)::int AS n FROM cyclone_steps WHERE state = 'completed' AND attempt = 1`);
      expect(rows[0].n).toBe(8);
    });
  });

  it('runWorkers: false makes an enqueue-only client whose jobs another app runs', async () => {
    const db = await harness.database();

    const ApiModule = taggedModule(db.url, 'api', { runWorkers: false });

    const WorkerModule = taggedModule(db.url, 'worker');

    const api = await harness.start(ApiModule);
    expect(api.get(CycloneStats).servedQueues.size).toBe(0);
    const client = api.get(CycloneClient);
    const runId = await client.enqueue('tagged', { i: 1 });

    // Nobody runs it while only the enqueue-only app is up: its loops go round, it never claims.
    const claims = passesOf(api, 'cyclone:claim');
    await waitForPasses(api, 'cyclone:recovery', 3);
    expect(claims()).toBe(0);
    const [step] = await client.listSteps(runId);
    expect(step.state).toBe('available');
    expect(ranBy).toEqual([]);

    await harness.start(WorkerModule);
    await expect(client.result(runId, { timeout: 10_000 })).resolves.toEqual({ by: 'worker', i: 1 });
    expect(ranBy).toEqual(['worker']);
  });

  it('connection: { dataSource } uses the app DataSource and leaves it open on close', async () => {
    const db = await harness.database();
    const dataSource = new DataSource({ type: 'postgres', url: db.url });
    await dataSource.initialize();
    harness.defer(async () => {
      if (dataSource.isInitialized) await dataSource.destroy();
    });

    @Module({
      imports: [CycloneModule.forRoot({ connection: { dataSource }, pollInterval: FAST_POLL })],
      providers: [stepsTagged('ds')],
    })
    class AppModule {}

    const app = await harness.start(AppModule);
    expect(app.get(CycloneDatabase).dataSource).toBe(dataSource);
    const runId = await app.get(CycloneClient).enqueue('tagged', { i: 2 });
    await expect(app.get(CycloneClient).result(runId, { timeout: 10_000 })).resolves.toEqual({ by: 'ds', i: 2 });

    await harness.close(app);
    expect(dataSource.isInitialized).toBe(true);
    // Still usable, and it holds what Cyclone wrote.
    await expect(dataSource.query(`SELECT state FROM cyclone_runs WHERE id = $1`, [runId])).resolves.toEqual([
      { state: 'completed' },
    ]);
  });

  it('without a connection option, uses CYCLONE_DATABASE_URL (before DATABASE_URL)', async () => {
    const db = await harness.database();
    const saved = { CYCLONE_DATABASE_URL: process.env.CYCLONE_DATABASE_URL, DATABASE_URL: process.env.DATABASE_URL };
    process.env.CYCLONE_DATABASE_URL = db.url;
    // Unreachable: if Cyclone chose it, the app would fail to start.
    process.env.DATABASE_URL = 'postgres://nobody:nothing@127.0.0.1:1/nowhere';
    try {
      @Module({
        imports: [CycloneModule.forRoot({ pollInterval: FAST_POLL })],
        providers: [stepsTagged('env')],
      })
      class AppModule {}

      const app = await harness.start(AppModule);
      const runId = await app.get(CycloneClient).enqueue('tagged', { i: 3 });
      await expect(app.get(CycloneClient).result(runId, { timeout: 10_000 })).resolves.toEqual({ by: 'env', i: 3 });
      const rows = await sql(db.url, 'SELECT state FROM cyclone_runs WHERE id = $1', [runId]);
      expect(rows).toEqual([{ state: 'completed' }]);
    } finally {
      for (const [key, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });
});

describe('loops and @nestjs/schedule', () => {
  it("registers its loops in the app's SchedulerRegistry and does not run the host's own jobs twice", async () => {
    const db = await harness.database();
    /** When each of the host's own jobs ran. */
    const ticks = { interval: [] as number[], cron: [] as number[] };

    @Injectable()
    class HostJobs {
      @Interval(200)
      everyFifth() {
        ticks.interval.push(Date.now());
      }

      @Cron('* * * * * *')
      everySecond() {
        ticks.cron.push(Date.now());
      }
    }

    @Module({
      imports: [
        ScheduleModule.forRoot(),
        CycloneModule.forRoot({ connection: { url: db.url }, pollInterval: FAST_POLL }),
      ],
      providers: [HostJobs, stepsTagged('sched')],
    })
    class AppModule {}

    const app = await harness.start(AppModule);
    const registry = app.get(SchedulerRegistry);
    expect(registry.getTimeouts()).toEqual(expect.arrayContaining(['cyclone:poll', 'cyclone:retention']));
    expect(registry.getIntervals()).toHaveLength(1);
    expect(registry.getCronJobs().size).toBe(1);

    // Cyclone keeps working alongside.
    const runId = await app.get(CycloneClient).enqueue('tagged', { i: 4 });
    await expect(app.get(CycloneClient).result(runId, { timeout: 10_000 })).resolves.toEqual({ by: 'sched', i: 4 });

    // Timers never fire early: one registration ticks a period apart, a second one would tick in between.
    await waitFor('four ticks of each job', () => ticks.interval.length >= 4 && ticks.cron.length >= 4, 15_000);
    const gaps = (times: number[]) => times.slice(1).map((t, i) => t - times[i]);
    expect(Math.min(...gaps(ticks.interval))).toBeGreaterThanOrEqual(150);
    expect(Math.min(...gaps(ticks.cron))).toBeGreaterThanOrEqual(500);

    // The poll loop keeps re-registering under its name while the app runs.
    await waitForPasses(app, 'cyclone:poll', 2);
    expect(registry.getTimeouts()).toContain('cyclone:poll');
  });

  it('does not put a SchedulerRegistry into an app that did not import ScheduleModule', async () => {
    const db = await harness.database();

    const AppModule = taggedModule(db.url, 'plain');

    const app = await harness.start(AppModule);
    expect(() => app.get(SchedulerRegistry)).toThrow();
    // Its loops still run (on a private registry): jobs are picked up by polling.
    const runId = await app.get(CycloneClient).enqueue('tagged', { i: 5 });
    await expect(app.get(CycloneClient).result(runId, { timeout: 10_000 })).resolves.toEqual({ by: 'plain', i: 5 });
  });
});

describe('app.close()', () => {
  it('stops the workers: a job enqueued after close is not run by the closed app', async () => {
    const db = await harness.database();

    const ClosedModule = taggedModule(db.url, 'closed');

    const ApiModule = taggedModule(db.url, 'api', { runWorkers: false });

    const SuccessorModule = taggedModule(db.url, 'successor');

    const closing = await harness.start(ClosedModule);
    const first = await closing.get(CycloneClient).enqueue('tagged', { i: 0 });
    await expect(closing.get(CycloneClient).result(first, { timeout: 10_000 })).resolves.toEqual({ by: 'closed', i: 0 });
    const stats = closing.get(CycloneStats);
    await harness.close(closing);
    const closedPasses = passesOf(closing, undefined);

    const api = await harness.start(ApiModule);
    const client = api.get(CycloneClient);
    const runId = await client.enqueue('tagged', { i: 1 });
    // The api app's loops go round; none of the closed app's does.
    await waitForPasses(api, 'cyclone:recovery', 4);
    expect(closedPasses()).toBe(0);
    expect((await client.listSteps(runId))[0].state).toBe('available');
    expect(ranBy).toEqual(['closed']);
    // The closed app holds no LISTEN connection any more: only the api app's remains.
    const listeners = await sql(
      db.url,
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'cyclone-listener' AND datname = current_database()`,
    );
    expect(listeners[0].n).toBe(1);
    const pollTick = () => stats.loopStates().find((loop) => loop.name === 'cyclone:poll')?.lastTickAt;
    const lastTick = pollTick()!.getTime();
    await waitForPasses(api, 'cyclone:recovery', 2);
    expect(pollTick()!.getTime()).toBe(lastTick);
    expect(closedPasses()).toBe(0);

    // The job was runnable all along: a running app picks it up.
    await harness.start(SuccessorModule);
    await expect(client.result(runId, { timeout: 10_000 })).resolves.toEqual({ by: 'successor', i: 1 });
    expect(ranBy).toEqual(['closed', 'successor']);
  });
});
