import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Injectable } from '@nestjs/common';
import { trace, type Span } from '@opentelemetry/api';
import { Step, defineWorkflow } from 'cyclone-nestjs';
import { CycloneTestEnv, type CycloneTestEnvOptions } from 'cyclone-nestjs/testing';
import { closeAll } from './support/handler-probe.js';
import { sql } from './support/sql.js';
import { installTracing, toRecord, type SpanRecord } from './support/tracing.js';
import { waitFor } from './support/wait.js';
import { TRACED_KIND, TracedSteps } from './tracing/traced-steps.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The compiled worker of the two-process test; `npm test` builds it in its `pretest` step. */
const WORKER_SCRIPT = join(ROOT, '.build/test/tracing/traced-worker.js');

@Injectable()
class NodeSteps {
  @Step('node_step')
  async run() {
    return 'ran';
  }
}

const Fanout = defineWorkflow('fanout').step('left', 'node_step').step('right', 'node_step').step('join', 'node_step', {
  after: ['left', 'right'],
});

let tracing: ReturnType<typeof installTracing>;
beforeAll(() => {
  tracing = installTracing();
});
afterAll(() => tracing.uninstall());

const envs: CycloneTestEnv[] = [];
afterEach(async () => {
  await closeAll(envs);
  tracing.exporter.reset();
});

async function start(options: CycloneTestEnvOptions = {}): Promise<CycloneTestEnv> {
  const env = await CycloneTestEnv.create({ providers: [TracedSteps, NodeSteps], workflows: [Fanout], ...options });
  envs.push(env);
  return env;
}

const spans = () => tracing.exporter.getFinishedSpans().map(toRecord);
const named = (name: string) => spans().filter((s) => s.name === name);
/** Waits until `count` spans of that name have ended. */
const ended = (name: string, count = 1) =>
  waitFor(`${count} span(s) "${name}" to end`, () => (named(name).length >= count ? named(name) : undefined));

/** Runs `work` inside a span of the test's own, as an HTTP request's span would be; returns that span. */
async function inRequest<T>(work: () => Promise<T>): Promise<{ root: SpanRecord; value: T }> {
  let root!: Span;
  const value = await trace.getTracer('test').startActiveSpan('POST /reports', async (span) => {
    root = span;
    try {
      return await work();
    } finally {
      span.end();
    }
  });
  return { root: named('POST /reports').find((s) => s.spanId === root.spanContext().spanId)!, value };
}

describe('OpenTelemetry spans', () => {
  it('a producer span around enqueue, and a consumer span per attempt continuing its trace, the handler\'s spans inside', async () => {
    const env = await start();
    const { root, value: runId } = await inRequest(() => env.client.enqueue(TRACED_KIND, {}));
    await env.client.result(runId);
    const [consumer] = await ended(`process ${TRACED_KIND}`);
    const [producer] = named(`enqueue ${TRACED_KIND}`);

    expect(producer).toMatchObject({
      kind: 'PRODUCER',
      traceId: root.traceId,
      parentSpanId: root.spanId,
      attributes: {
        'messaging.system': 'cyclone',
        'messaging.operation.type': 'send',
        'messaging.operation.name': 'enqueue',
        'messaging.destination.name': 'default',
        'messaging.message.id': runId,
        'cyclone.step.kind': TRACED_KIND,
      },
    });
    expect(consumer).toMatchObject({
      kind: 'CONSUMER',
      traceId: root.traceId,
      parentSpanId: producer.spanId,
      status: { code: 0 },
      attributes: {
        'messaging.system': 'cyclone',
        'messaging.operation.type': 'process',
        'messaging.destination.name': 'default',
        'messaging.message.id': runId,
        'cyclone.run.id': runId,
        'cyclone.node.id': TRACED_KIND,
        'cyclone.step.kind': TRACED_KIND,
        'cyclone.step.attempt': 1,
        'cyclone.step.reclaims': 0,
        'cyclone.step.outcome': 'completed',
      },
    });
    const [inner] = named('inner work');
    expect(inner).toMatchObject({ traceId: root.traceId, parentSpanId: consumer.spanId });

    // The trace context is stored with the run by the enqueue itself.
    const [run] = await sql(env, 'SELECT trace_context FROM cyclone_runs WHERE id = $1', [runId]);
    expect(run.trace_context.traceparent).toBe(`00-${root.traceId}-${producer.spanId}-01`);
  });

  it('records a failed attempt on its span (status, error.type, exception), and the retry is another span of the trace', async () => {
    const env = await start();
    const { root, value: runId } = await inRequest(() => env.client.enqueue(TRACED_KIND, { failFirst: true }));
    await env.client.result(runId);
    const attempts = (await ended(`process ${TRACED_KIND}`, 2)).sort(
      (a, b) => Number(a.attributes['cyclone.step.attempt']) - Number(b.attributes['cyclone.step.attempt']),
    );
    const [producer] = named(`enqueue ${TRACED_KIND}`);
    expect(attempts.map((s) => [s.traceId, s.parentSpanId])).toEqual([
      [root.traceId, producer.spanId],
      [root.traceId, producer.spanId],
    ]);
    expect(attempts[0]).toMatchObject({
      status: { code: 2, message: 'the first attempt fails' },
      events: ['exception'],
      attributes: { 'cyclone.step.attempt': 1, 'cyclone.step.outcome': 'retried', 'error.type': 'error' },
    });
    expect(attempts[1]).toMatchObject({ status: { code: 0 }, attributes: { 'cyclone.step.attempt': 2, 'cyclone.step.outcome': 'completed' } });
  });

  it('enqueueMany has one producer span for the batch; enqueueTx and a workflow start have theirs; every step continues them', async () => {
    const env = await start();
    const { root, value: many } = await inRequest(() => env.client.enqueueMany(TRACED_KIND, [{}, {}, {}]));
    const tx = await env.dataSource.transaction((manager) => env.client.enqueueTx(manager, TRACED_KIND, {}));
    const flow = await env.client.start(Fanout, null);
    for (const runId of [...many, tx, flow]) await env.runUntilComplete(runId);

    const [batch] = named(`enqueue_many ${TRACED_KIND}`);
    expect(batch).toMatchObject({ kind: 'PRODUCER', parentSpanId: root.spanId, attributes: { 'messaging.batch.message_count': 3 } });
    expect(batch.attributes['messaging.message.id']).toBeUndefined();
    const consumers = await ended(`process ${TRACED_KIND}`, 4);
    const ofRun = (runId: string) => consumers.find((c) => c.attributes['cyclone.run.id'] === runId)!;
    for (const runId of many) expect(ofRun(runId)).toMatchObject({ traceId: root.traceId, parentSpanId: batch.spanId });

    const [txSpan] = named(`enqueue ${TRACED_KIND}`);
    expect(txSpan.attributes['messaging.message.id']).toBe(tx);
    expect(ofRun(tx)).toMatchObject({ traceId: txSpan.traceId, parentSpanId: txSpan.spanId });

    const [started] = named('start fanout');
    expect(started).toMatchObject({
      kind: 'PRODUCER',
      attributes: { 'messaging.operation.name': 'start', 'cyclone.workflow': 'fanout', 'messaging.message.id': flow },
    });
    const nodes = await ended('process node_step', 3);
    expect(nodes.map((n) => n.attributes['cyclone.node.id']).sort()).toEqual(['join', 'left', 'right']);
    for (const node of nodes) expect(node).toMatchObject({ traceId: started.traceId, parentSpanId: started.spanId });
  });

  it('an enqueue outside any span starts a trace of its own; tracing: false makes no span and stores no trace context', async () => {
    const env = await start();
    const runId = await env.client.enqueue(TRACED_KIND, {});
    await env.client.result(runId);
    const [consumer] = await ended(`process ${TRACED_KIND}`);
    const [producer] = named(`enqueue ${TRACED_KIND}`);
    expect(producer.parentSpanId).toBeUndefined();
    expect(consumer).toMatchObject({ traceId: producer.traceId, parentSpanId: producer.spanId });
    await env.close();
    envs.length = 0;
    tracing.exporter.reset();

    const off = await start({ tracing: false });
    const { value: quiet } = await inRequest(() => off.client.enqueue(TRACED_KIND, {}));
    await off.client.result(quiet);
    expect(spans().map((s) => s.name)).toEqual(['POST /reports', 'inner work']);
    const [run] = await sql(off, 'SELECT trace_context FROM cyclone_runs WHERE id = $1', [quiet]);
    expect(run.trace_context).toBeNull();
  });
});

describe('a trace across two processes', () => {
  let worker: ChildProcess | undefined;
  afterEach(() => {
    worker?.kill('SIGKILL');
    worker = undefined;
  });

  it("continues the enqueuer's trace in the worker process that runs the step: one span tree", async () => {
    if (!existsSync(WORKER_SCRIPT)) {
      throw new Error(`${WORKER_SCRIPT} is missing: run the tests with \`npm test\`, whose pretest compiles into .build.`);
    }
    // This process only enqueues; the step runs in the other one.
    const env = await start({ runWorkers: false });
    const remote: SpanRecord[] = [];
    const output: string[] = [];
    worker = spawn(process.execPath, [WORKER_SCRIPT], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      env: { ...process.env, TRACED_DATABASE_URL: env.databaseUrl },
    });
    worker.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    worker.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    const ready = new Promise<void>((resolve, reject) => {
      worker!.on('message', (msg: { type: string; span?: SpanRecord }) => {
        if (msg.type === 'ready') resolve();
        if (msg.type === 'span') remote.push(msg.span!);
      });
      worker!.once('exit', (code) => reject(new Error(`the worker exited (${code}) before it was ready:\n${output.join('')}`)));
    });
    await ready;

    const { root, value: runId } = await inRequest(() => env.client.enqueue(TRACED_KIND, {}));
    const result = (await env.client.result(runId, { timeout: 20_000 })) as { pid: number };
    expect(result.pid).toBe(worker.pid);
    expect(result.pid).not.toBe(process.pid);
    await waitFor('the worker\'s spans', () => remote.some((s) => s.name === `process ${TRACED_KIND}`), 10_000);

    const [producer] = named(`enqueue ${TRACED_KIND}`);
    const consumer = remote.find((s) => s.name === `process ${TRACED_KIND}`)!;
    const inner = remote.find((s) => s.name === 'inner work')!;
    // request → enqueue (this process) → process → inner work (the worker process): one trace.
    expect([root, producer, consumer, inner].map((s) => s.traceId)).toEqual(Array(4).fill(root.traceId));
    expect(producer.parentSpanId).toBe(root.spanId);
    expect(consumer).toMatchObject({
      kind: 'CONSUMER',
      parentSpanId: producer.spanId,
      attributes: { 'cyclone.run.id': runId, 'cyclone.step.outcome': 'completed' },
    });
    expect(inner.parentSpanId).toBe(consumer.spanId);
    // Nothing of the step's ran here.
    expect(named(`process ${TRACED_KIND}`)).toEqual([]);
  });
});
