import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Registry } from 'prom-client';
import { CycloneStats, InvalidOptionError, Step, Workflow, defineWorkflow, type StepContext, type WorkflowContext } from 'cyclone-nestjs';
import { CycloneMetrics, CycloneMetricsModule, METRIC_NAMES, type CycloneMetricsOptions } from 'cyclone-nestjs/metrics';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { expectCycloneError } from './support/e2e-helpers.js';
import { HandlerProbe, POLLING_OFF, claimAsDeadWorker, closeAll, firstPollTick } from './support/handler-probe.js';
import { scrape, type Scrape } from './support/prometheus.js';
import { sql } from './support/sql.js';
import { waitFor } from './support/wait.js';

const probe = new HandlerProbe();
/** Runs that have snoozed once; the next attempt completes. */
const snoozed = new Set<string>();

@Injectable()
class Steps {
  @Step('ok')
  async ok(input: unknown) {
    return { echoed: input };
  }

  @Step('flaky', { queue: 'bulk', maxAttempts: 3, backoff: () => 10 })
  async flaky(_input: unknown, ctx: StepContext) {
    if (ctx.attempt === 1) throw new Error('the first attempt fails');
    return 'second time lucky';
  }

  @Step('doomed', { maxAttempts: 1 })
  async doomed(): Promise<never> {
    throw new Error('never works');
  }

  @Step('slowpoke', { maxAttempts: 1, timeout: 150 })
  async slowpoke(_input: unknown, ctx: StepContext): Promise<never> {
    return new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
  }

  @Step('snoozer')
  async snoozer(_input: unknown, ctx: StepContext) {
    if (snoozed.has(ctx.runId)) return 'rested';
    snoozed.add(ctx.runId);
    return ctx.snooze(10);
  }

  @Step('held')
  async held(_input: unknown, ctx: StepContext) {
    return probe.cooperate(ctx);
  }
}

const Pair = defineWorkflow('pair').step('a', 'ok');

const envs: CycloneTestEnv[] = [];
afterEach(async () => {
  probe.releaseAll();
  await closeAll(envs);
  probe.reset();
});

async function start(
  metrics: CycloneMetricsOptions = {},
  options: Parameters<typeof CycloneTestEnv.create>[0] = {},
): Promise<{ env: CycloneTestEnv; registry: Registry }> {
  const registry = (metrics.registry as Registry | undefined) ?? new Registry();
  const env = await CycloneTestEnv.create({
    providers: [Steps],
    imports: [CycloneMetricsModule.forRoot({ sampleInterval: 50, ...metrics, registry })],
    queues: { default: { workers: 4 }, bulk: { workers: 2 } },
    workflows: [Pair],
    ...options,
  });
  envs.push(env);
  return { env, registry };
}

/** Scrapes until `check` passes, so counters written just after a commit are waited for. */
async function scrapeUntil(registry: Registry, what: string, check: (s: Scrape) => boolean, timeoutMs = 10_000): Promise<Scrape> {
  return waitFor(
    what,
    async () => {
      const s = await scrape(registry);
      return check(s) ? s : undefined;
    },
    timeoutMs,
  );
}

describe('CycloneMetricsModule counters and histograms', () => {
  it('count each enqueue and each attempt by queue, kind and outcome, as the jobs ran', async () => {
    const { env, registry } = await start();
    const { client } = env;
    const runs = [
      ...(await Promise.all([1, 2, 3].map((i) => client.enqueue('ok', i)))),
      ...(await client.enqueueMany('ok', [4, 5])),
      await env.dataSource.transaction((manager) => client.enqueueTx(manager, 'ok', 6)),
      await client.enqueue('flaky', null),
      await client.enqueue('flaky', null),
      await client.enqueue('doomed', null),
      await client.enqueue('slowpoke', null),
      await client.enqueue('snoozer', null),
      await client.start(Pair, null),
    ];
    for (const runId of runs) await env.runUntilComplete(runId);

    const finished = (queue: string, kind: string, outcome: string) =>
      ['cyclone_steps_finished_total', { queue, kind, outcome }] as const;
    // Every attempt once under what became of it; failed ones also under failed (and timed_out).
    const expected = {
      'ok:completed': 7,
      'flaky:failed': 2,
      'flaky:retried': 2,
      'flaky:completed': 2,
      'doomed:failed': 1,
      'doomed:discarded': 1,
      'slowpoke:failed': 1,
      'slowpoke:timed_out': 1,
      'slowpoke:discarded': 1,
      'snoozer:snoozed': 1,
      'snoozer:completed': 1,
    };
    const outcomesOf = (s: Scrape): Record<string, number> =>
      Object.fromEntries(s.series('cyclone_steps_finished_total').map(({ labels, value }) => [`${labels.kind}:${labels.outcome}`, value]));
    const total = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);
    // A counter moves just after its outcome commits, which may be after the run is seen finished;
    // an attempt's run time is observed when its handler returns, which for the step the sweep timed
    // out comes after its outcome.
    const s = await scrapeUntil(
      registry,
      'every outcome and every run time to be counted',
      (s) =>
        total(outcomesOf(s)) >= total(expected) &&
        s.value('cyclone_step_duration_seconds_count', { queue: 'default', kind: 'slowpoke' }) !== undefined,
    );
    expect(s.value('cyclone_jobs_enqueued_total', { queue: 'default', kind: 'ok' })).toBe(6);
    expect(s.value('cyclone_jobs_enqueued_total', { queue: 'bulk', kind: 'flaky' })).toBe(2);
    expect(s.value('cyclone_jobs_enqueued_total', { queue: 'default', kind: 'doomed' })).toBe(1);
    expect(s.value('cyclone_workflows_started_total', { queue: 'default', workflow: 'pair' })).toBe(1);

    expect(outcomesOf(s)).toEqual(expected);
    expect(s.value(...finished('bulk', 'flaky', 'retried'))).toBe(2);

    // One observation per attempt run here: run time, and the wait from due to claim.
    expect(s.value('cyclone_step_duration_seconds_count', { queue: 'default', kind: 'ok' })).toBe(7);
    expect(s.value('cyclone_step_duration_seconds_count', { queue: 'bulk', kind: 'flaky' })).toBe(4);
    expect(s.value('cyclone_step_wait_seconds_count', { queue: 'bulk', kind: 'flaky' })).toBe(4);
    expect(s.value('cyclone_step_wait_seconds_count', { queue: 'default', kind: 'snoozer' })).toBe(2);
    // The timed-out attempt ran until its 150 ms deadline.
    expect(s.value('cyclone_step_duration_seconds_sum', { queue: 'default', kind: 'slowpoke' })).toBeGreaterThanOrEqual(0.14);
    expect(s.value('cyclone_step_duration_seconds_bucket', { queue: 'default', kind: 'slowpoke', le: '0.1' })).toBe(0);
    expect(s.value('cyclone_step_duration_seconds_bucket', { queue: 'default', kind: 'slowpoke', le: '+Inf' })).toBe(1);
  });

  it("count a code workflow's start, its passes that suspended, its completion, and the steps it ran", async () => {
    @Injectable()
    class CodeFlow {
      @Workflow('counted')
      async counted(_input: unknown, wf: WorkflowContext) {
        const a = await wf.step('a', 'ok', 1);
        const b = await wf.step('b', 'ok', 2);
        return [a, b];
      }
    }
    const { env, registry } = await start({}, { providers: [Steps, CodeFlow] });
    const runId = await env.client.start('counted', null);
    await env.runUntilComplete(runId);
    const s = await scrapeUntil(registry, 'the workflow counted completed', (x) =>
      x.value('cyclone_steps_finished_total', { queue: 'default', kind: 'counted', outcome: 'completed' }) === 1,
    );
    expect(s.value('cyclone_workflows_started_total', { queue: 'default', workflow: 'counted' })).toBe(1);
    // A pass that waited for each step, then the one that returned.
    expect(s.value('cyclone_steps_finished_total', { queue: 'default', kind: 'counted', outcome: 'suspended' })).toBe(2);
    expect(s.value('cyclone_steps_finished_total', { queue: 'default', kind: 'ok', outcome: 'completed' })).toBe(2);
  });

  it('count an attempt cancelled under its handler, and a step the sweep reclaimed from a dead worker', async () => {
    const { env, registry } = await start({}, { leaseTtl: 300 });
    const held = await env.client.enqueue('held', null);
    const call = await probe.call(held);
    await env.client.cancel(held);
    await call.aborted;

    // A worker that claimed and died: this client's sweep reclaims it (on a queue it does not serve, so it stays there).
    const orphan = await env.client.enqueue('ok', null, { queue: 'orphan' });
    await claimAsDeadWorker(env, ['ok'], { queue: 'orphan', leaseTtlMs: 1 });

    const s = await scrapeUntil(
      registry,
      'the cancel and the reclaim to be counted',
      (s) =>
        s.value('cyclone_steps_finished_total', { queue: 'default', kind: 'held', outcome: 'cancelled' }) === 1 &&
        s.value('cyclone_steps_finished_total', { queue: 'orphan', kind: 'ok', outcome: 'reclaimed' }) === 1,
    );
    expect(s.series('cyclone_steps_finished_total')).toHaveLength(2);
    expect((await env.client.listSteps(orphan))[0]).toMatchObject({ state: 'available', reclaims: 1 });
  });
});

describe('CycloneMetricsModule gauges', () => {
  it("show the cluster's queues as the cyclone:metrics loop samples them: backlog, running, oldest wait, paused, stranded", async () => {
    // Polling off: no sweep after the first one, so a stranded lease stays stranded.
    const { env, registry } = await start({}, { pollInterval: POLLING_OFF });
    await firstPollTick(env);
    const { client } = env;
    await Promise.all([1, 2, 3].map((i) => client.enqueue('ok', i, { queue: 'parked' })));
    await client.enqueue('ok', 4, { queue: 'parked', processIn: '1h' });
    const held = await Promise.all([1, 2].map(() => client.enqueue('held', null)));
    await Promise.all(held.map((runId) => probe.call(runId)));
    await client.pauseQueue('bulk');
    const [dead] = await claimAsDeadWorker(env, ['ok'], { queue: 'parked', limit: 1 });
    await sql(env, `UPDATE cyclone_steps SET lease_expiry = now() - interval '1 hour' WHERE id = $1`, [dead.id]);
    // One of the due steps left has waited two minutes.
    await sql(
      env,
      `UPDATE cyclone_steps SET scheduled_at = now() - interval '2 minutes'
        WHERE id = (SELECT min(id) FROM cyclone_steps WHERE queue = 'parked' AND state = 'available' AND scheduled_at <= now())`,
    );

    const s = await scrapeUntil(
      registry,
      'a sample taken after all of that',
      (s) =>
        s.value('cyclone_leases_stranded') === 1 &&
        s.value('cyclone_queue_oldest_available_seconds', { queue: 'parked' })! >= 119 &&
        s.value('cyclone_queue_paused', { queue: 'bulk' }) === 1,
    );
    const steps = (queue: string, state: string) => s.value('cyclone_queue_steps', { queue, state });
    // parked: 3 due (one of them claimed by the dead worker), 1 due in an hour.
    expect([steps('parked', 'available'), steps('parked', 'scheduled'), steps('parked', 'running')]).toEqual([2, 1, 1]);
    expect([steps('default', 'available'), steps('default', 'scheduled'), steps('default', 'running')]).toEqual([0, 0, 2]);
    // A served queue with nothing in it, paused here, reports zeros rather than vanishing.
    expect([steps('bulk', 'available'), steps('bulk', 'running')]).toEqual([0, 0]);
    expect(s.value('cyclone_queue_paused', { queue: 'bulk' })).toBe(1);
    expect(s.value('cyclone_queue_paused', { queue: 'parked' })).toBe(0);
    const oldest = s.value('cyclone_queue_oldest_available_seconds', { queue: 'parked' })!;
    expect(oldest).toBeGreaterThanOrEqual(119);
    expect(oldest).toBeLessThan(300);
    expect(s.value('cyclone_queue_oldest_available_seconds', { queue: 'default' })).toBe(0);

    // Loops of this process by age; the sampler is one of them.
    const loops = Object.fromEntries(s.series('cyclone_loop_last_tick_age_seconds').map((x) => [x.labels.loop, x.value]));
    expect(Object.keys(loops).sort()).toEqual([
      'cyclone:clients',
      'cyclone:flow-keys',
      'cyclone:metrics',
      'cyclone:partitions',
      'cyclone:poll',
      'cyclone:recovery',
      'cyclone:retention',
      'cyclone:schedules',
      'cyclone:timers',
    ]);
    expect(loops['cyclone:metrics']).toBeLessThan(5);

    // The backlog goes: the next samples say so with zeros.
    probe.releaseAll();
    await sql(env, `DELETE FROM cyclone_steps WHERE queue = 'parked'; DELETE FROM cyclone_runs WHERE queue = 'parked'`);
    const after = await scrapeUntil(
      registry,
      'a sample without the parked steps',
      (s) => s.value('cyclone_queue_steps', { queue: 'parked', state: 'available' }) === 0 && s.value('cyclone_leases_stranded') === 0,
    );
    expect(after.value('cyclone_queue_oldest_available_seconds', { queue: 'parked' })).toBe(0);
  });

  it('are sampled only when the metrics module is imported: without it no cyclone:metrics loop runs', async () => {
    const env = await CycloneTestEnv.create({ providers: [Steps] });
    envs.push(env);
    await firstPollTick(env);
    const stats = env.app.get(CycloneStats);
    expect(stats.loopStates().map((l) => l.name)).not.toContain('cyclone:metrics');
    expect(stats.clusterSample).toBeNull();
  });
});

describe('CycloneMetricsModule options', () => {
  it('registers every metric, under the prefix given, and serves the exposition text with its content type', async () => {
    const { env, registry } = await start({ prefix: 'jobs_' });
    const names = (await registry.getMetricsAsJSON()).map((m) => m.name).sort();
    expect(names).toEqual(METRIC_NAMES.map((n) => `jobs_${n}`).sort());
    const metrics = env.app.get(CycloneMetrics);
    expect(metrics.contentType).toContain('text/plain');
    await env.client.result(await env.client.enqueue('ok', 1));
    await waitFor('the completion to be counted', async () =>
      (await metrics.metrics()).includes('jobs_steps_finished_total{queue="default",kind="ok",outcome="completed"} 1'),
    );
  });

  it("uses prom-client's default registry when given none, and leaves it when the app closes", async () => {
    const { register } = await import('prom-client');
    const env = await CycloneTestEnv.create({ providers: [Steps], imports: [CycloneMetricsModule.forRoot()] });
    try {
      expect(register.getSingleMetric('cyclone_jobs_enqueued_total')).toBeDefined();
      expect(env.app.get(CycloneMetrics).registry).toBe(register);
    } finally {
      await env.close();
    }
    expect(register.getSingleMetric('cyclone_jobs_enqueued_total')).toBeUndefined();
    // So the next app in this process can register them again.
    const again = await CycloneTestEnv.create({ providers: [Steps], imports: [CycloneMetricsModule.forRoot()] });
    await again.close();
  });

  it('refuses a second registration of the same metrics in one registry, registering nothing of its own', async () => {
    const registry = new Registry();
    await start({ registry });
    const before = (await registry.getMetricsAsJSON()).length;
    await expectCycloneError(
      CycloneTestEnv.create({ providers: [Steps], imports: [CycloneMetricsModule.forRoot({ registry })] }),
      InvalidOptionError,
      'invalid_option',
    ).then((err) => expect(err.message).toContain('already has a metric named cyclone_jobs_enqueued_total'));
    expect((await registry.getMetricsAsJSON()).length).toBe(before);
  });

  it.each([
    [{ prefix: '1abc' }, 'must be a Prometheus metric name prefix'],
    [{ prefix: 'has space_' }, 'must be a Prometheus metric name prefix'],
    [{ registry: {} as Registry }, 'must be a prom-client Registry'],
    [{ sampleInterval: 0 }, 'must be at least 10 ms'],
    [{ sampleInterval: 'soon' as never }, 'Option "sampleInterval" must be a non-negative number of milliseconds'],
    [{ interval: 5 } as never, 'Unknown option "interval" in CycloneMetricsModule options'],
  ])('forRoot(%j) throws where the module is defined, saying what is wrong', async (options, message) => {
    const err = await expectCycloneError(
      async () => CycloneMetricsModule.forRoot(options as CycloneMetricsOptions),
      InvalidOptionError,
      'invalid_option',
    );
    expect(err.message).toContain(message);
  });
});
