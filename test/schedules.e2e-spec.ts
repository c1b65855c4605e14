import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { InvalidScheduleError, Step } from 'cyclone-nestjs';
import { CycloneTestEnv, TestDatabase } from 'cyclone-nestjs/testing';
import { ScheduleTicker } from '../libs/cyclone/src/maintenance/schedule.ticker.js';
import { HandlerProbe, testEnvs } from './support/handler-probe.js';
import { countRows, expectCycloneError } from './support/e2e-helpers.js';
import { sql } from './support/sql.js';
import { sleep, waitFor } from './support/wait.js';
import { FLOW_WORKER_SCRIPT, WorkerFleet } from './crash/worker-fleet.js';

/**
 * Durable schedules (SPEC §13): exactly one run per tick across replicas,
 * restarts and a replica SIGKILLed in the middle of a tick; catch-up after
 * downtime; removed schedules stop; bad expressions fail startup.
 */

@Injectable()
class ScheduledSteps {
  @Step('every_second')
  async everySecond(): Promise<null> {
    return null;
  }

  @Step('daily')
  async daily(): Promise<null> {
    return null;
  }

  @Step('tagged', { schedule: { cron: '*/2 * * * * *', input: { tag: 'from-step' } } })
  async tagged(input: { tag: string }): Promise<string> {
    return input.tag;
  }
}

const probe = new HandlerProbe();
const { createEnv, replicaOf } = testEnvs([ScheduledSteps], probe);

const EVERY_SECOND = [{ name: 'pulse', cron: '* * * * * *', kind: 'every_second' }];

/** Runs of a schedule: the tick each one was started for (from its unique key), oldest first. */
async function runsOf(on: CycloneTestEnv | string, schedule: string): Promise<{ tick: string; n: number }[]> {
  const rows = await sql<{ unique_key: string; n: number }>(
    on,
    `SELECT unique_key, count(*)::int AS n FROM cyclone_runs WHERE unique_key LIKE $1 GROUP BY unique_key ORDER BY unique_key`,
    [`schedule:${schedule}:%`],
  );
  return rows.map((r) => ({ tick: r.unique_key.slice(`schedule:${schedule}:`.length), n: r.n }));
}

/** Every whole second from the first tick to the last is there, once. */
function expectEverySecondOnce(runs: { tick: string; n: number }[]): void {
  for (const r of runs) expect(r).toEqual({ tick: r.tick, n: 1 });
  const times = runs.map((r) => Date.parse(r.tick));
  for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBe(1_000);
}

describe('schedules across three replicas', () => {
  it('one run per tick over many ticks, on time, with lastTickAt and nextTickAt from listSchedules', async () => {
    const a = await createEnv({ schedules: EVERY_SECOND });
    const before = await a.client.listSchedules();
    const pulse = before.find((s) => s.name === 'pulse')!;
    expect(pulse).toEqual({
      name: 'pulse',
      kind: 'every_second',
      cron: '* * * * * *',
      timezone: 'UTC',
      nextTickAt: expect.any(Date),
      lastTickAt: pulse.lastTickAt === null ? null : expect.any(Date),
    });
    const envs = [a, await replicaOf(a, { schedules: EVERY_SECOND }), await replicaOf(a, { schedules: EVERY_SECOND })];
    // Many ticks with all three replicas up, and two of the @Step schedule's (every 2 s).
    const firstTicks = (await runsOf(a, 'pulse')).length;
    await waitFor(
      'six ticks with the three replicas up',
      async () => (await runsOf(a, 'pulse')).length >= firstTicks + 6 && (await runsOf(a, 'tagged')).length >= 2,
      20_000,
    );
    const runs = await runsOf(a, 'pulse');
    expect(runs.length).toBeGreaterThanOrEqual(5);
    expectEverySecondOnce(runs);
    // Started within a moment of their tick (database clock).
    const [{ late }] = await sql(
      a,
      `SELECT max(extract(epoch FROM r.created_at) * 1000 - extract(epoch FROM substr(r.unique_key, 16)::timestamptz) * 1000) AS late
         FROM cyclone_runs r WHERE unique_key LIKE 'schedule:pulse:%'`,
    );
    expect(Number(late)).toBeLessThan(1_000);
    const listed = (await envs[2].client.listSchedules()).find((s) => s.name === 'pulse')!;
    expect(listed.lastTickAt).toBeInstanceOf(Date);
    expect(Date.parse(runs[runs.length - 1].tick) - listed.lastTickAt!.getTime()).toBeLessThanOrEqual(0);
    expect(listed.nextTickAt!.getTime()).toBeGreaterThan(listed.lastTickAt!.getTime());
    // A @Step schedule is named by its kind and runs with its input.
    const tagged = await runsOf(a, 'tagged');
    expect(tagged.length).toBeGreaterThanOrEqual(2);
    const [{ input }] = await sql(a, `SELECT input FROM cyclone_runs WHERE unique_key LIKE 'schedule:tagged:%' LIMIT 1`);
    expect(input).toEqual({ tag: 'from-step' });
  }, 30_000);

  it('lastTickAt survives restarts, no tick runs twice across them, and a removed schedule stops', async () => {
    // The clients below start and stop as an app's replicas would; `owner` only holds the database.
    const owner = await createEnv({ runWorkers: false });
    const url = owner.databaseUrl;
    const start = (options: Parameters<typeof CycloneTestEnv.create>[0] = {}) =>
      CycloneTestEnv.create({ providers: [ScheduledSteps], databaseUrl: url, isolate: false, ...options });
    const a = await start({ schedules: EVERY_SECOND });
    await waitFor('a tick', async () => (await runsOf(url, 'pulse')).length >= 2, 5_000);
    const b = await start({ schedules: EVERY_SECOND });
    await a.close();
    // b goes on alone.
    const ticksWithA = (await runsOf(url, 'pulse')).length;
    await waitFor('a tick of b alone', async () => (await runsOf(url, 'pulse')).length > ticksWithA, 5_000);
    await b.close();
    const last = (await runsOf(url, 'pulse')).at(-1)!;
    // A client of the same app started afresh knows the last tick from the table.
    const c = await start({ schedules: EVERY_SECOND, runWorkers: false });
    const listed = (await c.client.listSchedules()).find((s) => s.name === 'pulse')!;
    expect(listed.lastTickAt!.getTime()).toBeGreaterThanOrEqual(Date.parse(last.tick));
    const ticksBeforeC = (await runsOf(url, 'pulse')).length;
    await waitFor('two ticks of c', async () => (await runsOf(url, 'pulse')).length >= ticksBeforeC + 2, 5_000);
    await c.close();
    expectEverySecondOnce(await runsOf(url, 'pulse'));

    // An app without the schedule: no more runs of it, and it is not listed.
    const count = (await runsOf(url, 'pulse')).length;
    const d = await start();
    try {
      // Its schedule loop goes round (for the @Step schedule, every 2 s) and never fires the removed one.
      await d.waitForPasses('cyclone:schedules', 2);
      expect((await runsOf(url, 'pulse')).length).toBe(count);
      expect((await d.client.listSchedules()).map((s) => s.name)).toEqual(['tagged']);
    } finally {
      await d.close();
    }
  }, 30_000);

  it("after downtime 'latest' starts the latest missed tick once, 'none' skips it", async () => {
    // A daily tick five minutes ago: the next one is a day away, so nothing is due on time.
    const past = new Date(Date.now() - 5 * 60_000);
    const cron = `${past.getUTCMinutes()} ${past.getUTCHours()} * * *`;
    const schedules = [
      { name: 'catch_latest', cron, kind: 'daily' },
      { name: 'catch_none', cron, kind: 'daily', catchUp: 'none' as const },
    ];
    const a = await createEnv({ schedules, runWorkers: false });
    await waitFor('the schedules to be registered', async () => (await sql(a, "SELECT 1 FROM cyclone_schedules WHERE name LIKE 'catch_%'")).length === 2);
    // A pass now finds nothing owed: the tick five minutes ago came before the schedules were known.
    expect((await a.app.get(ScheduleTicker).tick()).filter((t) => t.name.startsWith('catch_'))).toEqual([]);
    expect(await runsOf(a, 'catch_latest')).toEqual([]);
    // As if these schedules had been known for three days and every client had been down since.
    await sql(a, `UPDATE cyclone_schedules SET since = now() - interval '3 days', last_tick_at = NULL`);
    const b = await replicaOf(a, { schedules, runWorkers: false });
    const c = await replicaOf(a, { schedules, runWorkers: false });
    await waitFor('the catch-up run', async () => (await runsOf(a, 'catch_latest')).length > 0, 5_000);
    // Once it is there, a pass of every replica finds nothing more owed.
    const passes = await Promise.all([a, b, c].map((env) => env.app.get(ScheduleTicker).tick()));
    expect(passes.flat().filter((t) => t.outcome === 'fired')).toEqual([]);
    const latest = await runsOf(a, 'catch_latest');
    const expected = new Date(past);
    expected.setUTCSeconds(0, 0);
    expect(latest).toEqual([{ tick: expected.toISOString(), n: 1 }]);
    expect(await runsOf(a, 'catch_none')).toEqual([]);
    const listed = await b.client.listSchedules();
    expect(listed.find((s) => s.name === 'catch_latest')!.lastTickAt).toEqual(expected);
    expect(listed.find((s) => s.name === 'catch_none')!.lastTickAt).toBeNull();
  });

  it('a bad expression, an unknown time zone or kind, a duplicate name: startup fails naming the step and the expression, writing nothing', async () => {
    const env = await createEnv({ runWorkers: false, providers: [] });
    const cases: [object, RegExp][] = [
      [{ schedules: [{ name: 'bad', cron: '61 * * * *', kind: 'daily' }] }, /Schedule "bad" of step "daily" \(cron "61 \* \* \* \*"\)/],
      [{ schedules: [{ name: 'tz', cron: '0 3 * * *', kind: 'daily', timezone: 'Nowhere/Land' }] }, /time zone "Nowhere\/Land" is unknown/],
      [{ schedules: [{ name: 'ghost', cron: '0 3 * * *', kind: 'no_such_kind' }] }, /no @Step handler/],
      [{ schedules: [{ name: 'tagged', cron: '0 3 * * *', kind: 'daily' }] }, /another schedule has this name/],
      [{ schedules: [{ name: 'c', cron: '0 3 * * *', kind: 'daily', catchUp: 'all' }] }, /catchUp must be 'latest' or 'none'/],
    ];
    for (const [options, message] of cases) {
      const err = await expectCycloneError(
        CycloneTestEnv.create({ providers: [ScheduledSteps], databaseUrl: env.databaseUrl, isolate: false, ...options }),
        InvalidScheduleError,
        'invalid_schedule',
      );
      expect(err.message).toMatch(message);
    }
    @Injectable()
    class BadStepSchedule {
      @Step('bad_nightly', { schedule: '0 25 * * *' })
      async run(): Promise<null> {
        return null;
      }
    }
    const err = await expectCycloneError(
      CycloneTestEnv.create({ providers: [BadStepSchedule], databaseUrl: env.databaseUrl, isolate: false }),
      InvalidScheduleError,
      'invalid_schedule',
    );
    expect(err.message).toContain('Schedule "bad_nightly" of step "bad_nightly" (cron "0 25 * * *")');
    expect(await countRows(env)).toEqual({ runs: 0, steps: 0 });
    expect(await sql(env, 'SELECT name FROM cyclone_schedules')).toEqual([]);
  });
});

/** Replicas SIGKILLed around a tick, one after another. */
const KILLS = 3;

describe('schedules with replica processes SIGKILLed mid-tick', () => {
  let fleet: WorkerFleet | undefined;
  let database: TestDatabase | undefined;
  afterEach(async () => {
    await fleet?.killAll();
    await database?.drop();
    fleet = database = undefined;
  });

  it('every tick gets exactly one run while replicas die around the tick', async () => {
    WorkerFleet.assertBuilt(FLOW_WORKER_SCRIPT);
    database = await TestDatabase.create(process.env.CYCLONE_TEST_DATABASE_URL!);
    fleet = new WorkerFleet({ databaseUrl: database.url, leaseTtlMs: 800, pollMs: [50, 200], slots: 2 }, FLOW_WORKER_SCRIPT);
    const env = { FLOW_CRON: '* * * * * *' };
    for (let i = 0; i < 3; i++) fleet.spawn(env);
    await Promise.all(fleet.processes.map((w) => w.whenReady));
    const url = database.url;
    // A replica is SIGKILLed just after a tick, while the replicas are firing it, KILLS times,
    // each time with all three up again first, however long a start takes on a busy machine.
    for (let kill = 0; kill < KILLS; kill++) {
      await Promise.all(fleet.live().map((w) => w.whenReady));
      // Ticks fall on the wall clock's whole seconds: this waits for the next one to come due.
      await sleep(1_000 - (Date.now() % 1_000) + Math.floor(Math.random() * 15));
      const live = fleet.readyWorkers();
      await fleet.kill(live[Math.floor(Math.random() * live.length)]);
      fleet.spawn(env);
    }
    await Promise.all(fleet.live().map((w) => w.whenReady));
    const back = Date.now();
    // Ticks fired after the fleet is whole again, and every tick's run finished (a killed holder's is reclaimed).
    const runs = await waitFor(
      'a tick after the fleet is whole again',
      async () => {
        const all = await runsOf(url, 'fleet_tick');
        return all.length >= 8 && Date.parse(all[all.length - 1].tick) >= back + 1_000 ? all : undefined;
      },
      20_000,
    );
    expectEverySecondOnce(runs);
    await waitFor(
      "every tick's run to complete",
      async () => {
        const [{ open }] = await sql(
          url,
          `SELECT count(*)::int AS open FROM cyclone_runs WHERE kind = 'scheduled_tick' AND unique_key = ANY($1) AND state <> 'completed'`,
          [runs.map((r) => `schedule:fleet_tick:${r.tick}`)],
        );
        return open === 0;
      },
      20_000,
    );
    process.stderr.write(`\n[schedules] ${runs.length} ticks, each run once, with ${KILLS} replicas SIGKILLed just after a tick\n`);
  }, 90_000);
});
