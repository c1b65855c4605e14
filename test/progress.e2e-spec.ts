import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { CycloneError, Step, defineWorkflow, type StepContext } from 'cyclone-nestjs';
import { CycloneTestEnv, type CycloneTestEnvOptions } from 'cyclone-nestjs/testing';
import { deferred } from './support/e2e-helpers.js';
import { closeAll, stepOf, stepWhen } from './support/handler-probe.js';
import { sql } from './support/sql.js';
import { sleep, waitFor } from './support/wait.js';

/** What the `tracked` handler does, set by each test; it gets the call's number (from 0) too. */
let script: (ctx: StepContext, call: number) => Promise<unknown> = async () => null;
let calls = 0;

@Injectable()
class Steps {
  @Step('tracked', { maxAttempts: 2, backoff: () => 10 })
  async tracked(_input: unknown, ctx: StepContext) {
    return script(ctx, calls++);
  }
}

const envs: CycloneTestEnv[] = [];
afterEach(async () => {
  await closeAll(envs);
  calls = 0;
});

async function start(options: CycloneTestEnvOptions = {}, logWrites = true): Promise<CycloneTestEnv> {
  const env = await CycloneTestEnv.create({ providers: [Steps], ...options });
  envs.push(env);
  if (!logWrites) return env;
  // Every write that changes a step's progress to a value, with the database's time.
  await sql(
    env,
    `CREATE TABLE progress_writes (id bigserial PRIMARY KEY, step_id bigint, value jsonb, at timestamptz DEFAULT clock_timestamp());
     CREATE FUNCTION log_progress() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       IF NEW.progress IS NOT NULL AND NEW.progress IS DISTINCT FROM OLD.progress THEN
         INSERT INTO progress_writes (step_id, value) VALUES (NEW.id, NEW.progress);
       END IF;
       RETURN NEW;
     END $$;
     CREATE TRIGGER log_progress AFTER UPDATE OF progress ON cyclone_steps FOR EACH ROW EXECUTE FUNCTION log_progress();`,
  );
  return env;
}

const writes = (env: CycloneTestEnv) =>
  sql<{ value: unknown; at: Date }>(env, 'SELECT value, at FROM progress_writes ORDER BY id');

describe('ctx.progress', () => {
  it('stores the first report at once and later ones at most once a heartbeat interval, the latest winning', async () => {
    // Heartbeat interval: leaseTtl / 3 = 300 ms.
    const env = await start({ leaseTtl: 900 });
    const burst = deferred();
    const finish = deferred();
    const reportedAll = deferred();
    script = async (ctx) => {
      ctx.progress({ done: 0, total: 40 });
      await burst.promise;
      for (let done = 1; done <= 40; done++) {
        ctx.progress({ done, total: 40 });
        await sleep(15);
      }
      reportedAll.resolve();
      await finish.promise;
      return 'built';
    };
    const runId = await env.client.enqueue('tracked', null);
    const first = await stepWhen(env, runId, (s) => s.progress !== null, 'the first progress', 2_000);
    expect(first).toMatchObject({ state: 'running', progress: { done: 0, total: 40 } });

    burst.resolve();
    await reportedAll.promise;
    // The last value reported is written within one interval of the one before.
    await stepWhen(env, runId, (s) => (s.progress as { done: number }).done === 40, 'the last progress', 2_000);
    const written = await writes(env);
    // 40 reports over about 600 ms: the first, one an interval, the last.
    expect(written.length).toBeGreaterThanOrEqual(3);
    expect(written.length).toBeLessThanOrEqual(6);
    const gaps = written.slice(1).map((w, i) => w.at.getTime() - written[i].at.getTime());
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(250);

    finish.resolve();
    await env.runUntilComplete(runId);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'completed', output: 'built', progress: { done: 40, total: 40 } });
  });

  it('checks the value like an output: a value that is not storable JSON throws InvalidInputError and writes nothing', async () => {
    const env = await start({ maxPayloadBytes: 1_024 });
    const cyclic: { self?: unknown } = {};
    cyclic.self = cyclic;
    script = async (ctx) => {
      const refused = [cyclic, 10n, 'x'.repeat(2_000), { when: () => 1 }].map((value) => {
        try {
          ctx.progress(value);
          return 'accepted';
        } catch (err) {
          return `${(err as CycloneError).code}: ${(err as Error).message}`;
        }
      });
      return refused;
    };
    const runId = await env.client.enqueue('tracked', null);
    await env.runUntilComplete(runId);
    const step = await stepOf(env, runId);
    expect(step.output).toEqual([
      'invalid_input: The progress is not JSON-serialisable ($.self refers back to itself). Pass plain objects, arrays, strings, numbers, booleans or null.',
      'invalid_input: The progress is not JSON-serialisable ($ is a bigint; send it as a string). Pass plain objects, arrays, strings, numbers, booleans or null.',
      expect.stringMatching(/^invalid_input: The progress is at least 2002 bytes of JSON, over the limit of 1024 bytes/),
      expect.stringMatching(/^invalid_input: The progress is not JSON-serialisable \(\$\.when is a function\)/),
    ]);
    expect(step.progress).toBeNull();
    expect(await writes(env)).toEqual([]);
  });

  it('is fenced on the lease: a holder that lost its step cannot overwrite the progress of the attempt that took it over', async () => {
    // Interval 100 ms; the old holder learns of the loss at its next heartbeat, and ignores it.
    const env = await start({ leaseTtl: 300 });
    const gates = [deferred(), deferred()];
    const staleReported = deferred();
    const oldHolderDone = deferred();
    script = async (ctx, call) => {
      ctx.progress(`attempt of call ${call}`);
      await gates[call].promise;
      if (call === 0) {
        ctx.progress('stale');
        staleReported.resolve();
        await oldHolderDone.promise;
      }
      return call;
    };
    // Every progress write tried, whether it matched a row or not (the statement's trigger fires either way).
    await sql(
      env,
      `CREATE TABLE progress_tries (id bigserial PRIMARY KEY);
       CREATE FUNCTION log_progress_try() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF position('SET progress = $5' in current_query()) > 0 THEN INSERT INTO progress_tries DEFAULT VALUES; END IF;
         RETURN NULL;
       END $$;
       CREATE TRIGGER log_progress_try AFTER UPDATE OF progress ON cyclone_steps FOR EACH STATEMENT EXECUTE FUNCTION log_progress_try();`,
    );
    const tries = async () => (await sql<{ n: number }>(env, 'SELECT count(*)::int AS n FROM progress_tries'))[0].n;
    const runId = await env.client.enqueue('tracked', null);
    await stepWhen(env, runId, (s) => s.progress === 'attempt of call 0', 'the first holder\'s progress');
    await env.expireLease(runId, 'tracked');
    // The step is claimed again, and the new attempt starts without the old one's progress.
    const taken = await stepWhen(env, runId, (s) => s.state === 'running' && s.reclaims === 1, 'the second claim');
    expect(taken.progress === null || taken.progress === 'attempt of call 1').toBe(true);
    await stepWhen(env, runId, (s) => s.progress === 'attempt of call 1', "the second holder's progress");

    gates[0].resolve();
    await staleReported.promise;
    // Each holder's first report, then the old holder's stale one: tried, and refused.
    await waitFor("the old holder's write to be tried", async () => (await tries()) >= 3);
    expect((await stepOf(env, runId)).progress).toBe('attempt of call 1');
    expect((await writes(env)).map((w) => w.value)).toEqual(['attempt of call 0', 'attempt of call 1']);

    oldHolderDone.resolve();
    gates[1].resolve();
    await env.runUntilComplete(runId);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'completed', output: 1, progress: 'attempt of call 1' });
  });

  it('starts each attempt without the progress of the one before, and is null for a step that never reported', async () => {
    const env = await start({ leaseTtl: 300 });
    const second = deferred();
    script = async (ctx, call) => {
      if (call === 0) {
        ctx.progress('half way');
        await waitFor('the first progress to be stored', async () => (await sql(env, 'SELECT 1 FROM progress_writes')).length > 0);
        throw new Error('then fails');
      }
      await second.promise;
      return 'done';
    };
    const runId = await env.client.enqueue('tracked', null);
    const retried = await stepWhen(env, runId, (s) => s.state === 'running' && s.attempt === 2, 'the second attempt');
    expect(retried.progress).toBeNull();
    second.resolve();
    await env.runUntilComplete(runId);
    expect((await stepOf(env, runId)).progress).toBeNull();
  });
});

describe('schema version 3', () => {
  it('upgrades a version-1 database: undone and applied again, workflows start and steps report progress', async () => {
    const One = defineWorkflow('one').step('a', 'tracked');
    const env = await start({ workflows: [One] }, false);
    const { CycloneObservability1764921600000 } = await import('../libs/cyclone/src/schema/migrations.js');
    await sql(env, CycloneObservability1764921600000.down);
    const columns = await sql(
      env,
      `SELECT column_name FROM information_schema.columns WHERE column_name IN ('progress', 'trace_context')`,
    );
    expect(columns).toEqual([]);
    const fn = await sql(env, `SELECT pg_get_function_identity_arguments('cyclone_start_workflow'::regproc) AS args`);
    expect(fn[0].args).not.toContain('p_trace_context');

    await sql(env, CycloneObservability1764921600000.up);
    const [{ args }] = await sql(env, `SELECT pg_get_function_identity_arguments('cyclone_start_workflow'::regproc) AS args`);
    expect(args).toContain('p_trace_context jsonb');
    script = async (ctx) => {
      ctx.progress(1);
      await waitFor('the progress to be stored', async () =>
        (await env.client.listSteps(ctx.runId)).some((step) => step.progress === 1),
      );
      return 'ok';
    };
    const runId = await env.client.enqueue('tracked', null);
    await env.runUntilComplete(runId);
    expect(await stepOf(env, runId)).toMatchObject({ state: 'completed', progress: 1 });
    const workflowRun = await env.client.start(One, null);
    expect((await env.runUntilComplete(workflowRun)).state).toBe('completed');
  });
});
