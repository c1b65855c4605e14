import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type LoggerService } from '@nestjs/common';
import pg from 'pg';
import {
  CycloneDatabase,
  CycloneStats,
  DatabaseUnavailableError,
  NotInTransactionError,
  OutcomeUnknownError,
  Step,
  defineWorkflow,
  type StepContext,
} from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { NotificationListener } from '../libs/cyclone/src/notifications/notification-listener.js';
import { ENQUEUE_JOB, ENQUEUE_JOBS } from '../libs/cyclone/src/sql/enqueue.sql.js';
import {
  CANCEL_RUN,
  GET_OUTPUT,
  GET_RUN,
  LIST_STEPS,
  RETRY_STEPS,
  RUN_OUTCOME,
} from '../libs/cyclone/src/sql/runs.sql.js';
import {
  PAUSED_QUEUES,
  PAUSE_QUEUE,
  PAUSE_RUN,
  RESUME_QUEUE,
  RESUME_RUN,
  SIGNAL_RUN,
  START_WORKFLOW,
} from '../libs/cyclone/src/sql/workflow.sql.js';
import { expectCycloneError } from './support/e2e-helpers.js';
import { HandlerProbe } from './support/handler-probe.js';
import { testServerUrl } from './support/nest-app-harness.js';
import { sql } from './support/sql.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { waitFor } from './support/wait.js';

/**
 * SPEC §16: every error a public call returns is a CycloneError. A database
 * that cannot be reached is DatabaseUnavailableError; a write whose
 * connection is lost as it commits is OutcomeUnknownError carrying its run
 * ids, so the caller can look them up instead of writing it again. The
 * faults are real: a TCP proxy between Cyclone and the server refuses
 * connections, or cuts one after the server committed and before its answer
 * reached Cyclone.
 */

@Injectable()
class FaultSteps {
  @Step('echo')
  async echo(input: unknown) {
    return input;
  }

  @Step('always_fails', { maxAttempts: 1 })
  async alwaysFails(_input: unknown, ctx: StepContext): Promise<never> {
    throw new Error(`attempt ${ctx.attempt} failed`);
  }
}

const Gate = defineWorkflow('gate').waitForSignal('open').step('after', 'echo', { after: ['open'] });

let proxy: TcpProxy;
let env: CycloneTestEnv;
/** What the LISTEN connection says of its retries: the first at warn, the rest at debug, each with its next pause. */
const listenerRetries: string[] = [];
const retriesOnly = (message: unknown) => {
  if (String(message).startsWith('LISTEN connection lost')) listenerRetries.push(String(message));
};

beforeAll(async () => {
  proxy = await TcpProxy.start(testServerUrl());
  env = await CycloneTestEnv.create({
    databaseUrl: proxy.url,
    providers: [FaultSteps],
    workflows: [Gate],
    pollInterval: [50, 300],
    // The faults make the library warn by design; the errors the calls throw are the evidence.
    logger: { log: () => undefined, error: () => undefined, warn: retriesOnly, debug: retriesOnly },
  });
});

afterAll(async () => {
  await proxy?.up();
  await env?.close();
  await proxy?.close();
});

const NOT_DUE = { processIn: '1h' };
const client = () => env.client;
const stateOf = async (runId: string) => (await client().getRun(runId)).state;

async function failedRun(): Promise<string> {
  const runId = await client().enqueue('always_fails', {});
  await waitFor('the run to fail', async () => (await stateOf(runId)) === 'failed', 10_000);
  return runId;
}

describe('a write whose connection is lost after the server committed it', () => {
  // [call, the statement it sends, set-up, the call, the run ids the error must carry, what the commit did]
  const cases: [
    string,
    string,
    () => Promise<string | undefined>,
    (runId: string | undefined) => Promise<unknown>,
    (runId: string | undefined, err: OutcomeUnknownError) => Promise<void>,
  ][] = [
    [
      'enqueue',
      ENQUEUE_JOBS.name,
      async () => undefined,
      () => client().enqueue('echo', { n: 1 }, NOT_DUE),
      async (_, err) => expect(await stateOf(err.runId!)).toBe('running'),
    ],
    [
      'enqueue with a unique key',
      ENQUEUE_JOB.text,
      async () => undefined,
      () => client().enqueue('echo', { n: 2 }, { ...NOT_DUE, unique: 'lost-commit' }),
      async (_, err) => expect((await client().getRun(err.runId!)).uniqueKey).toBe('lost-commit'),
    ],
    [
      'enqueueAction',
      ENQUEUE_JOBS.name,
      async () => undefined,
      () => client().enqueueAction('echo', { n: 3 }, NOT_DUE),
      async (_, err) => expect(await stateOf(err.runId!)).toBe('running'),
    ],
    [
      'start',
      START_WORKFLOW.text,
      async () => undefined,
      () => client().start(Gate, { n: 4 }),
      async (_, err) => expect((await client().listSteps(err.runId!)).map((s) => s.state)).toEqual(['waiting_signal', 'pending']),
    ],
    [
      'signal',
      SIGNAL_RUN.text,
      () => client().start(Gate, { n: 5 }),
      (runId) => client().signal(runId!, 'open', { ok: true }),
      async (runId) => expect((await client().listSteps(runId!))[0]).toMatchObject({ nodeId: 'open', state: 'completed' }),
    ],
    [
      'cancel',
      CANCEL_RUN.text,
      () => client().enqueue('echo', { n: 6 }, NOT_DUE),
      (runId) => client().cancel(runId!),
      async (runId) => expect(await stateOf(runId!)).toBe('cancelled'),
    ],
    [
      'pause',
      PAUSE_RUN.text,
      () => client().start(Gate, { n: 7 }),
      (runId) => client().pause(runId!),
      async (runId) => expect(await stateOf(runId!)).toBe('paused'),
    ],
    [
      'resume',
      RESUME_RUN.text,
      async () => {
        const runId = await client().start(Gate, { n: 8 });
        await client().pause(runId);
        return runId;
      },
      (runId) => client().resume(runId!),
      async (runId) => expect(await stateOf(runId!)).toBe('running'),
    ],
    [
      'retry',
      RETRY_STEPS.text,
      failedRun,
      (runId) => client().retry(runId!, 'always_fails'),
      async (runId) =>
        // The reopened step ran again: its second attempt failed as well.
        void (await waitFor('the second attempt', async () => (await client().listSteps(runId!))[0].attempt === 2, 10_000)),
    ],
    [
      'retryAll',
      RETRY_STEPS.text,
      failedRun,
      (runId) => client().retryAll(runId!),
      async (runId) =>
        void (await waitFor('the second attempt', async () => (await client().listSteps(runId!))[0].attempt === 2, 10_000)),
    ],
  ];

  it.each(cases)('%s throws OutcomeUnknownError with the run id; looking it up shows the write', async (_name, marker, setUp, call, check) => {
    const runId = await setUp();
    const cut = proxy.cutAfterCommit(marker);
    const err = await expectCycloneError(call(runId), OutcomeUnknownError, 'outcome_unknown');
    await cut;
    expect(err.runIds).toHaveLength(1);
    if (runId !== undefined) expect(err.runIds).toEqual([runId]);
    expect(err.runId).toBe(err.runIds[0]);
    expect(err.message).toContain(err.runIds[0]);
    expect(err.message).toContain('getRun');
    await check(runId, err);
  });

  it('enqueueMany throws OutcomeUnknownError with every run id, and every one of them was written', async () => {
    const cut = proxy.cutAfterCommit(ENQUEUE_JOBS.name);
    const err = await expectCycloneError(
      client().enqueueMany('echo', [{ n: 1 }, { n: 2 }, { n: 3 }], NOT_DUE),
      OutcomeUnknownError,
      'outcome_unknown',
    );
    await cut;
    expect(err.runIds).toHaveLength(3);
    expect(err.runId).toBeUndefined();
    for (const runId of err.runIds) expect(await stateOf(runId)).toBe('running');
  });

  it.each([
    ['pauseQueue', PAUSE_QUEUE.text, () => client().pauseQueue('lost-q'), true],
    ['resumeQueue', RESUME_QUEUE.text, () => client().resumeQueue('lost-q'), false],
  ])('%s throws OutcomeUnknownError (no run ids: repeating it is safe); it took effect', async (_name, marker, call, paused) => {
    // A run on the queue makes it one that exists.
    await client().enqueue('echo', { queue: 'lost-q' }, { ...NOT_DUE, queue: 'lost-q' });
    const cut = proxy.cutAfterCommit(marker);
    const err = await expectCycloneError(call(), OutcomeUnknownError, 'outcome_unknown');
    await cut;
    expect(err.runIds).toEqual([]);
    expect(err.message).toContain('safe to repeat');
    expect((await client().pausedQueues()).includes('lost-q')).toBe(paused);
  });

  it('enqueueTx, whose transaction cannot commit once its connection is gone, throws DatabaseUnavailableError and nothing is written', async () => {
    const dataSource = env.dataSource;
    const before = await sql(env, 'SELECT count(*)::int AS n FROM cyclone_runs');
    const cut = proxy.cutAfterCommit(ENQUEUE_JOB.text);
    let caught: unknown;
    await dataSource
      .transaction(async (manager) => {
        await client().enqueueTx(manager, 'echo', { n: 'tx' });
      })
      .catch((err: unknown) => (caught = err));
    await cut;
    expect(caught).toBeInstanceOf(DatabaseUnavailableError);
    expect((caught as DatabaseUnavailableError).code).toBe('database_unavailable');
    expect(await sql(env, 'SELECT count(*)::int AS n FROM cyclone_runs')).toEqual(before);
  });
});

describe('a read whose connection is lost', () => {
  let done: string;
  beforeAll(async () => {
    done = await client().enqueue('echo', { read: true });
    await client().result(done, { timeout: 10_000 });
  });

  it.each([
    ['getRun', GET_RUN.text, () => client().getRun(done)],
    ['listSteps', LIST_STEPS.text, () => client().listSteps(done)],
    ['output', GET_OUTPUT.text, () => client().output(done, 'echo')],
    ['result', RUN_OUTCOME.text, () => client().result(done, { timeout: 5_000 })],
    ['pausedQueues', PAUSED_QUEUES.text, () => client().pausedQueues()],
  ])('%s throws DatabaseUnavailableError', async (_name, marker, call) => {
    const cut = proxy.cutAfterCommit(marker);
    const err = await expectCycloneError(call(), DatabaseUnavailableError, 'database_unavailable');
    await cut;
    expect(err.message).toContain('connection was lost');
  });
});

describe('a database that cannot be reached', () => {
  it('every public call throws DatabaseUnavailableError at once, naming the server but not the password', async () => {
    const runId = await client().enqueue('echo', { n: 'down' }, NOT_DUE);
    const gate = await client().start(Gate, {});
    const runner = env.dataSource.createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    await proxy.down();
    // The pool has seen its idle connections end.
    const pool = env.app.get(CycloneDatabase).pool;
    await waitFor('the pool to drop its idle connections', () => pool.idleCount === 0, 5_000);
    const calls: [string, () => Promise<unknown>][] = [
      ['enqueue', () => client().enqueue('echo', {})],
      ['enqueue with a unique key', () => client().enqueue('echo', {}, { unique: 'down' })],
      ['enqueueAction', () => client().enqueueAction('echo', {})],
      ['enqueueMany', () => client().enqueueMany('echo', [{}, {}])],
      ['start', () => client().start(Gate, {})],
      ['getRun', () => client().getRun(runId)],
      ['listSteps', () => client().listSteps(runId)],
      ['result', () => client().result(runId, { timeout: 1_000 })],
      ['output', () => client().output(runId, 'echo')],
      ['cancel', () => client().cancel(runId)],
      ['retry', () => client().retry(runId, 'echo')],
      ['retryAll', () => client().retryAll(runId)],
      ['signal', () => client().signal(gate, 'open')],
      ['pause', () => client().pause(gate)],
      ['resume', () => client().resume(gate)],
      ['pauseQueue', () => client().pauseQueue('default')],
      ['resumeQueue', () => client().resumeQueue('default')],
      ['pausedQueues', () => client().pausedQueues()],
    ];
    const failures: string[] = [];
    try {
      for (const [name, call] of calls) {
        const started = Date.now();
        let caught: unknown;
        try {
          await call();
        } catch (err) {
          caught = err;
        }
        const ms = Date.now() - started;
        if (!(caught instanceof DatabaseUnavailableError)) failures.push(`${name}: ${String(caught)}`);
        else if (ms > 2_000) failures.push(`${name}: took ${ms} ms`);
        else if (!caught.message.includes(`PostgreSQL at 127.0.0.1:${proxy.port}/cyclone_test`) || caught.message.includes(":postgres@")) {
          failures.push(`${name}: ${caught.message}`);
        }
      }
      // The caller's own transaction died with its connection: enqueueTx says so.
      const inTx = await expectCycloneError(client().enqueueTx(runner, 'echo', {}), NotInTransactionError, 'not_in_transaction');
      expect(inTx.message).toContain('connection to the database was lost');
    } finally {
      await proxy.up();
      await runner.release().catch(() => undefined);
    }
    expect(failures).toEqual([]);
    // Back: the calls work again.
    await expect(client().getRun(runId)).resolves.toMatchObject({ id: runId });
  });
});

describe("the LISTEN connection after an outage", () => {
  it('comes back within one poll interval (300 ms here) of the server accepting connections, however long the outage', async () => {
    const listener = env.app.get(NotificationListener);
    await waitFor('the listener to be connected', () => listener.isConnected, 10_000);
    await proxy.down();
    await waitFor('the listener to notice', () => !listener.isConnected, 5_000);
    // Down until its doubling pause between retries has reached its cap (the longest poll interval) and stayed there.
    const retriesBefore = listenerRetries.length;
    await waitFor(
      'two retries at the longest pause',
      () => listenerRetries.slice(retriesBefore).filter((line) => line.endsWith('retrying in 300 ms')).length >= 2,
      15_000,
    );
    await proxy.up();
    const upAt = Date.now();
    await waitFor('the listener to be back', () => listener.isConnected, 10_000, 10);
    const backMs = Date.now() - upAt;
    process.stderr.write(`\n[listener] back ${backMs} ms after the server accepted connections again (poll max 300 ms)\n`);
    expect(backMs).toBeLessThan(1_200);
  });
});

describe('statementTimeout', () => {
  let timed: CycloneTestEnv;
  let blocker: pg.Client;
  beforeAll(async () => {
    timed = await CycloneTestEnv.create({ providers: [FaultSteps], statementTimeout: 300, pollInterval: [50, 100], logger: false });
    blocker = new pg.Client({ connectionString: timed.databaseUrl });
    await blocker.connect();
  });
  afterAll(async () => {
    await blocker?.end();
    await timed?.close();
  });

  it("is set on Cyclone's connections", async () => {
    expect(await sql(timed, 'SHOW statement_timeout')).toEqual([{ statement_timeout: '300ms' }]);
    expect(timed.app.get(CycloneDatabase).statementTimeoutMs).toBe(300);
    // The default: 30 s.
    expect(await sql(env, 'SHOW statement_timeout')).toEqual([{ statement_timeout: '30s' }]);
  });

  it('cancels a call stuck behind a lock: DatabaseUnavailableError naming the option, nothing written; claims fail and go on instead of hanging', async () => {
    const stats = timed.app.get(CycloneStats);
    const failuresBefore = stats.claimFailures;
    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE cyclone_runs, cyclone_steps IN ACCESS EXCLUSIVE MODE');
    try {
      const started = Date.now();
      const err = await expectCycloneError(timed.client.enqueue('echo', { stuck: true }), DatabaseUnavailableError, 'database_unavailable');
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(err.message).toContain('statementTimeout');
      expect(err.reason).toBe('57014');
      // The workers' claims (which read the steps) are cancelled too, and counted, rather than hanging.
      await waitFor('a claim to time out', () => stats.claimFailures > failuresBefore, 5_000);
    } finally {
      await blocker.query('ROLLBACK');
    }
    expect(await sql(timed, 'SELECT count(*)::int AS n FROM cyclone_runs')).toEqual([{ n: 0 }]);
    const runId = await timed.client.enqueue('echo', { after: true });
    await expect(timed.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ after: true });
  });
});

/** Every line the app logs, with its level. */
class LevelLogger implements LoggerService {
  readonly lines: { level: string; message: string }[] = [];
  log(message: unknown) {
    this.lines.push({ level: 'log', message: String(message) });
  }
  warn(message: unknown) {
    this.lines.push({ level: 'warn', message: String(message) });
  }
  error(message: unknown) {
    this.lines.push({ level: 'error', message: String(message) });
  }
}

describe('the log while the database is down', () => {
  const held = new HandlerProbe();

  @Injectable()
  class HeldSteps {
    @Step('held_through_outage', { queue: 'second' })
    async hold(_input: unknown, ctx: StepContext) {
      // Its 600 ms lease can lapse during the outage and a sweep after it take the step over:
      // the run again then finishes at once, as the held one would have.
      if (ctx.reclaims > 0) return 'done';
      return held.cooperate(ctx);
    }
  }

  it('tells of the outage once and of its end once: no warning from each claim, loop and heartbeat that meets it', async () => {
    const ownProxy = await TcpProxy.start(testServerUrl());
    const logger = new LevelLogger();
    const outaged = await CycloneTestEnv.create({
      databaseUrl: ownProxy.url,
      providers: [FaultSteps, HeldSteps],
      queues: { default: { workers: 2 }, second: { workers: 2 } },
      pollInterval: [20, 60],
      leaseTtl: 600,
      logger,
    });
    try {
      const runId = await outaged.client.enqueue('held_through_outage', {});
      const call = await held.call(runId);
      const stats = outaged.app.get(CycloneStats);
      const from = logger.lines.length;
      const claimsBefore = stats.claimFailures;
      const heartbeatsBefore = stats.heartbeatFailures;
      await ownProxy.down();
      // Dozens of claims (two queues), loop passes and heartbeats meet the outage.
      await waitFor('40 failed claims', () => stats.claimFailures - claimsBefore >= 40, 30_000);
      await waitFor('3 failed heartbeats', () => stats.heartbeatFailures - heartbeatsBefore >= 3, 30_000);
      // The start-up check for shutdown hooks (this test app has none) may land in the window; it is not the outage's.
      const during = logger.lines.slice(from).filter((l) => l.level !== 'log' && !l.message.includes('no shutdown hooks are enabled'));
      // The LISTEN connection's own line is one too (it is a connection of its own, and says it once per outage).
      const others = during.filter((l) => !l.message.startsWith('LISTEN connection lost'));
      expect(others).toEqual([
        { level: 'warn', message: expect.stringContaining(`PostgreSQL at 127.0.0.1:${ownProxy.port}/cyclone_test_`) },
      ]);
      expect(others[0].message).toContain('cannot be reached');
      expect(during.length).toBeLessThanOrEqual(2);

      const back = logger.lines.length;
      await ownProxy.up();
      await waitFor('the log to say the database is back', () =>
        logger.lines.slice(back).find((l) => l.level === 'log' && l.message.includes('answers again')),
      );
      call.release('done');
      await expect(outaged.client.result(runId, { timeout: 10_000 })).resolves.toBe('done');
      expect(logger.lines.slice(back).filter((l) => l.message.includes('answers again'))).toHaveLength(1);
    } finally {
      held.releaseAll();
      await ownProxy.up();
      await outaged.close();
      await ownProxy.close();
    }
  });
});
