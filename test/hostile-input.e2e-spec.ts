import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { CycloneError, Step, defineWorkflow } from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { describeValue } from '../libs/cyclone/src/cyclone.messages.js';
import { resolveOptions } from '../libs/cyclone/src/options/resolved-options.js';
import { resolveStepOptions } from '../libs/cyclone/src/steps/step-options.js';
import { HOSTILE } from './support/hostile-values.js';
import { sql } from './support/sql.js';

/**
 * Every public call of the client, every argument (and every option) of it,
 * with hostile values of every type (support/hostile-values.ts). Each
 * either succeeds, when the value is one that position accepts, or is
 * refused with a CycloneError that says something, having written nothing:
 * no row of runs, steps or paused queues differs afterwards (inside
 * enqueueTx: nothing in the caller's transaction, which goes on working).
 */

@Injectable()
class Steps {
  @Step('echo')
  async echo(input: unknown) {
    return input;
  }
}

const Gate = defineWorkflow('gate').waitForSignal('open').step('after', 'echo', { after: ['open'] });

/** Values each kind of position takes. */
const JSON_VALUES = [
  'undefined', 'null', 'true', '0', '-0', '-1', '1.5', '2 ** 53', 'an empty string', 'a blank string', 'SQL',
  'a placeholder', 'a UUID nobody has', 'a number as a string', 'an empty object', 'an empty array',
  'an array with holes', 'an object without a prototype', 'an object without a prototype, with a key', 'a Date',
  'an invalid Date', 'a Date before 4713 BC', 'a RegExp', 'a Promise', 'an Error', 'a Buffer', 'a typed array',
  'a boxed string', 'a boxed number', 'an object with __proto__ as a key',
];
const NAMES = ['SQL', 'a placeholder', 'a UUID nobody has', 'a number as a string'];
const OPTIONS_OBJECTS = ['undefined', 'an empty object', 'an object without a prototype', 'an Error'];
const NOTHING: string[] = [];
/** What each option accepts (besides undefined, which is the option left out). */
const OPTION_VALUES: Record<string, string[]> = {
  queue: NAMES,
  unique: NAMES,
  priority: ['0', '-0', '-1'],
  processIn: ['0', '-0', '1.5'],
  processAt: ['a Date'],
  timeout: ['1.5'],
  maxAttempts: NOTHING,
  retention: ['0', '-0', '1.5'],
  maxReclaims: ['0', '-0'],
};

let env: CycloneTestEnv;
/** A run that waits for its signal, one that is done (cancelled), and a job waiting to run. */
let gate: string;
let done: string;
let waiting: string;

beforeAll(async () => {
  // No workers: nothing changes the tables between a call and the check of what it wrote.
  env = await CycloneTestEnv.create({ providers: [Steps], workflows: [Gate], runWorkers: false, maxPayloadBytes: 4_096, logger: false });
  gate = await env.client.start(Gate, {});
  waiting = await env.client.enqueue('echo', { waiting: true });
  done = await env.client.enqueue('echo', { done: true });
  await env.client.cancel(done);
  // result() marks the run as watched once; after that it writes nothing.
  await env.client.result(done, { timeout: 100 }).catch(() => undefined);
});
afterAll(async () => env?.close());

/** Every row Cyclone keeps, as text: any write shows. */
async function digest(query: (text: string) => Promise<{ d: string }[]> = (text) => sql(env, text) as Promise<{ d: string }[]>): Promise<string> {
  const [{ d }] = await query(`
    SELECT concat_ws('/',
      (SELECT md5(coalesce(string_agg(r::text, '|' ORDER BY r.id), '')) FROM cyclone_runs r),
      (SELECT md5(coalesce(string_agg(s::text, '|' ORDER BY s.id), '')) FROM cyclone_steps s),
      (SELECT md5(coalesce(string_agg(q::text, '|' ORDER BY q.queue), '')) FROM cyclone_paused_queues q)) AS d`);
  return d;
}

/** Runs `call` with each hostile value; returns what went wrong. */
async function probe(
  position: string,
  accepts: readonly string[],
  call: (value: unknown) => Promise<unknown>,
  state: () => Promise<string> = () => digest(),
  after?: () => Promise<void>,
): Promise<string[]> {
  const problems: string[] = [];
  let before = await state();
  for (const [label, make] of HOSTILE) {
    let outcome: unknown = 'resolved';
    try {
      await call(make());
    } catch (err) {
      outcome = err;
    }
    if (outcome === 'resolved') {
      if (!accepts.includes(label)) problems.push(`${position} <- ${label}: accepted`);
      // It wrote what it was asked to: the next value starts from there.
      before = await state();
      continue;
    }
    const now = await state();
    if (!(outcome instanceof CycloneError)) {
      problems.push(`${position} <- ${label}: threw ${describeValue(outcome)}: ${String((outcome as Error)?.message)}`);
    } else {
      if (outcome.message.length < 20 || /\[object |undefined undefined/.test(outcome.message)) {
        problems.push(`${position} <- ${label}: ${outcome.code} with a message that says nothing: ${outcome.message}`);
      }
      if (now !== before) problems.push(`${position} <- ${label}: ${outcome.code}, but it wrote something`);
    }
    before = now;
    await after?.();
  }
  return problems;
}

const option = (name: string) => (value: unknown) => ({ [name]: value });

describe('every public call with hostile values of every type', () => {
  it('enqueue, enqueueAction: every argument and option', async () => {
    const c = () => env.client;
    const problems = [
      ...(await probe('enqueue kind', NOTHING, (v) => c().enqueue(v as string, {}))),
      ...(await probe('enqueue input', JSON_VALUES, (v) => c().enqueue('echo', v))),
      ...(await probe('enqueue options', OPTIONS_OBJECTS, (v) => c().enqueue('echo', {}, v as object))),
      ...(await probe('enqueueAction kind', NOTHING, (v) => c().enqueueAction(v as string, {}))),
      ...(await probe('enqueueAction input', JSON_VALUES, (v) => c().enqueueAction('echo', v))),
    ];
    for (const [name, accepts] of Object.entries(OPTION_VALUES)) {
      // A unique key taken by the first accepted value refuses the next ones, as it should: each probe gets its own.
      let n = 0;
      problems.push(
        ...(await probe(`enqueue option ${name}`, ['undefined', ...accepts], (v) =>
          c().enqueue('echo', { n: n++ }, option(name)(v)),
        )),
      );
    }
    expect(problems).toEqual([]);
  });

  it('enqueueMany: the kind, the list, each input of it, and the options', async () => {
    const c = () => env.client;
    const problems = [
      ...(await probe('enqueueMany kind', NOTHING, (v) => c().enqueueMany(v as string, [{}]))),
      ...(await probe('enqueueMany inputs', ['an empty array', 'an array with holes'], (v) => c().enqueueMany('echo', v as unknown[]))),
      ...(await probe('enqueueMany input', JSON_VALUES, (v) => c().enqueueMany('echo', [{ ok: 1 }, v, { ok: 2 }]))),
      ...(await probe('enqueueMany options', OPTIONS_OBJECTS, (v) => c().enqueueMany('echo', [{}], v as object))),
      // unique is refused by enqueueMany whatever its value.
      ...(await probe('enqueueMany option unique', ['undefined'], (v) => c().enqueueMany('echo', [{}], { unique: v as string }))),
    ];
    for (const [name, accepts] of Object.entries(OPTION_VALUES)) {
      if (name === 'unique') continue;
      problems.push(...(await probe(`enqueueMany option ${name}`, ['undefined', ...accepts], (v) => c().enqueueMany('echo', [{}], option(name)(v)))));
    }
    expect(problems).toEqual([]);
  });

  it("enqueueTx: the manager, and every argument inside the caller's transaction, which is never aborted", async () => {
    const problems: string[] = [];
    problems.push(...(await probe('enqueueTx manager', NOTHING, (v) => env.client.enqueueTx(v as EntityManager, 'echo', {}))));
    const rollback = new Error('roll back what the probe wrote');
    await env.dataSource
      .transaction(async (manager) => {
        const inTx = () => digest((text) => manager.query(text));
        // After every refusal the transaction still runs statements, and still has the row written before.
        await manager.query(`CREATE TEMP TABLE business (n int) ON COMMIT DROP; INSERT INTO business VALUES (1)`);
        const stillOpen = async () => {
          const rows = await manager.query('SELECT count(*)::int AS n FROM business');
          if (rows[0].n !== 1) throw new Error('the business row is gone');
        };
        const c = env.client;
        problems.push(
          ...(await probe('enqueueTx kind', NOTHING, (v) => c.enqueueTx(manager, v as string, {}), inTx, stillOpen)),
          ...(await probe('enqueueTx input', JSON_VALUES, (v) => c.enqueueTx(manager, 'echo', v), inTx, stillOpen)),
          ...(await probe('enqueueTx options', OPTIONS_OBJECTS, (v) => c.enqueueTx(manager, 'echo', {}, v as object), inTx, stillOpen)),
        );
        for (const [name, accepts] of Object.entries(OPTION_VALUES)) {
          let n = 0;
          problems.push(
            ...(await probe(
              `enqueueTx option ${name}`,
              ['undefined', ...accepts],
              (v) => c.enqueueTx(manager, 'echo', { n: n++ }, option(name)(v)),
              inTx,
              stillOpen,
            )),
          );
        }
        await stillOpen();
        throw rollback;
      })
      .catch((err: unknown) => {
        if (err !== rollback) throw err;
      });
    expect(problems).toEqual([]);
  });

  it('start, signal: the workflow, the input, the options, the run, the signal name and payload', async () => {
    const c = () => env.client;
    let n = 0;
    const problems = [
      ...(await probe('start workflow', NOTHING, (v) => c().start(v as string, {}))),
      ...(await probe('start input', JSON_VALUES, (v) => c().start(Gate, v))),
      ...(await probe('start options', OPTIONS_OBJECTS, (v) => c().start(Gate, {}, v as object))),
      ...(await probe('start option unique', ['undefined', ...NAMES], (v) => c().start(Gate, { n: n++ }, { unique: v as string }))),
      ...(await probe('start option retention', ['undefined', ...OPTION_VALUES.retention], (v) => c().start(Gate, {}, { retention: v as number }))),
      ...(await probe('signal run', NOTHING, (v) => c().signal(v as string, 'open'))),
      ...(await probe('signal name', NOTHING, (v) => c().signal(gate, v as string))),
    ];
    // A fresh waiting run for each payload, started beforehand: an accepted payload delivers the signal.
    const gates: string[] = [];
    for (const _ of HOSTILE) gates.push(await c().start(Gate, {}));
    problems.push(...(await probe('signal payload', JSON_VALUES, (v) => c().signal(gates.shift()!, 'open', v))));
    expect(problems).toEqual([]);
  });

  it('getRun, listSteps, result, output, cancel, retry, retryAll, pause, resume, runNow: every argument', async () => {
    const c = () => env.client;
    const problems = [
      ...(await probe('getRun run', NOTHING, (v) => c().getRun(v as string))),
      ...(await probe('listSteps run', NOTHING, (v) => c().listSteps(v as string))),
      ...(await probe('result run', NOTHING, (v) => c().result(v as string, { timeout: 100 }))),
      // A cancelled run: result refuses it with RunCancelledError, whatever the timeout, once the options pass.
      ...(await probe('result options', NOTHING, (v) => c().result(done, v as object))),
      ...(await probe('result option timeout', NOTHING, (v) => c().result(done, { timeout: v as number }))),
      ...(await probe('output run', NOTHING, (v) => c().output(v as string, 'echo'))),
      ...(await probe('output node', NOTHING, (v) => c().output(waiting, v as string))),
      ...(await probe('cancel run', NOTHING, (v) => c().cancel(v as string))),
      ...(await probe('retry run', NOTHING, (v) => c().retry(v as string, 'echo'))),
      ...(await probe('retry node', NOTHING, (v) => c().retry(waiting, v as string))),
      ...(await probe('retryAll run', NOTHING, (v) => c().retryAll(v as string))),
      ...(await probe('pause run', NOTHING, (v) => c().pause(v as string))),
      ...(await probe('resume run', NOTHING, (v) => c().resume(v as string))),
      ...(await probe('runNow run', NOTHING, (v) => c().runNow(v as string, 'echo'))),
      ...(await probe('runNow node', NOTHING, (v) => c().runNow(waiting, v as string))),
    ];
    expect(problems).toEqual([]);
  });

  it('pauseQueue, resumeQueue: the queue', async () => {
    const problems = [
      ...(await probe('pauseQueue queue', NAMES, async (v) => {
        await env.client.pauseQueue(v as string);
        await env.client.resumeQueue(v as string);
      })),
      ...(await probe('resumeQueue queue', NAMES, (v) => env.client.resumeQueue(v as string))),
    ];
    expect(problems).toEqual([]);
    expect(await env.client.pausedQueues()).toEqual([]);
  });
});

describe('the options read at startup, with hostile values', () => {
  /** Each value either resolves or is refused with a CycloneError; nothing else escapes. */
  function probeSync(position: string, call: (value: unknown) => unknown): string[] {
    const problems: string[] = [];
    for (const [label, make] of HOSTILE) {
      try {
        call(make());
      } catch (err) {
        if (!(err instanceof CycloneError)) problems.push(`${position} <- ${label}: threw ${describeValue(err)}: ${String((err as Error)?.message)}`);
      }
    }
    return problems;
  }

  it('CycloneModule.forRoot options: the object and every option', () => {
    const keys = ['connection', 'queues', 'leaseTtl', 'pollInterval', 'maxReclaims', 'shutdownTimeout', 'runWorkers', 'migrationsRun',
      'retention', 'maxPayloadBytes', 'workflows', 'connectRetry', 'statementTimeout'];
    const problems = [
      ...probeSync('forRoot options', (v) => resolveOptions(v as object)),
      ...keys.flatMap((key) => probeSync(`forRoot option ${key}`, (v) => resolveOptions({ [key]: v }))),
      ...probeSync('forRoot option queues.default', (v) => resolveOptions({ queues: { default: v as { workers: number } } })),
      ...probeSync('forRoot option connectRetry.attempts', (v) => resolveOptions({ connectRetry: { attempts: v as number } })),
      ...probeSync('forRoot option connection.url', (v) => resolveOptions({ connection: { url: v as string } })),
    ];
    expect(problems).toEqual([]);
  });

  it('@Step kind, options object and every option', () => {
    const keys = ['queue', 'priority', 'timeout', 'maxAttempts', 'backoff', 'retention', 'maxReclaims'];
    const problems = [
      ...probeSync('@Step kind', (v) => resolveStepOptions(v as string, {})),
      ...probeSync('@Step options', (v) => resolveStepOptions('k', v as object)),
      ...keys.flatMap((key) => probeSync(`@Step option ${key}`, (v) => resolveStepOptions('k', { [key]: v }))),
    ];
    expect(problems).toEqual([]);
  });
});
