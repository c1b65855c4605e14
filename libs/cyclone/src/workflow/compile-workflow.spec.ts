import { describe, it, expect } from '@jest/globals';
import { compileWorkflow, type CompiledWorkflow } from './compile-workflow.js';
import { defineWorkflow, type WorkflowDefinition } from '../definitions/define-workflow.js';
import { InvalidWorkflowError } from '../errors/invalid-workflow.error.js';
import { CycloneError } from '../errors/cyclone.error.js';
import { resolveOptions, type ResolvedOptions } from '../options/resolved-options.js';
import { StepRegistry } from '../steps/step-registry.js';
import type { RegisteredStep } from '../steps/registered-step.js';
import { defineStep } from '../definitions/define-step.js';

/** A registered step as discovery would leave it: no defaults unless given. */
function step(kind: string, defaults: Partial<Omit<RegisteredStep, 'kind' | 'host' | 'handler'>> = {}): RegisteredStep {
  return {
    kind,
    host: `TestSteps.${kind}`,
    handler: async () => null,
    queue: undefined,
    priority: undefined,
    timeoutMs: undefined,
    maxAttempts: undefined,
    backoff: undefined,
    retentionMs: undefined,
    maxReclaims: undefined,
    flow: undefined,
    schedule: undefined,
    ...defaults,
  };
}

function registryOf(...steps: RegisteredStep[]): StepRegistry {
  const registry = new StepRegistry();
  for (const s of steps) registry.register(s);
  return registry;
}

/**
 * fetch: queue bulk, priority 5, 3 attempts, 30 s timeout, 2 reclaims.
 * score and notify: no defaults of their own.
 */
const registry = registryOf(
  step('fetch', { queue: 'bulk', priority: 5, maxAttempts: 3, timeoutMs: 30_000, maxReclaims: 2 }),
  step('score'),
  step('notify', { queue: 'mail', maxAttempts: 4 }),
);
const module = resolveOptions({});

/** Casts for values a TypeScript caller could not pass, but a JavaScript one (or `any`) can. */
const loose = (value: unknown) => value as any;

/** Compiles `def`, expects InvalidWorkflowError, and returns it. */
function rejection(def: WorkflowDefinition<any>, options: ResolvedOptions = module): InvalidWorkflowError {
  let caught: unknown;
  try {
    compileWorkflow(def, registry, options);
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(InvalidWorkflowError);
  expect(caught).toBeInstanceOf(CycloneError);
  expect((caught as InvalidWorkflowError).code).toBe('invalid_workflow');
  return caught as InvalidWorkflowError;
}

/** Expects the error to name the workflow and the node, in its fields and in its message. */
function expectNamesNode(err: InvalidWorkflowError, workflow: string, nodeId: string): void {
  expect(err.workflow).toBe(workflow);
  expect(err.nodeId).toBe(nodeId);
  expect(err.message).toContain(`Workflow "${workflow}"`);
  expect(err.message).toContain(`node "${nodeId}"`);
}

describe('compileWorkflow', () => {
  describe('a valid diamond with a signal and a sleep', () => {
    //        a (fetch)
    //       /         \
    //   b (score)   approval (signal, 2d, continue)
    //       |            |
    //       |        cooldown (sleep 10m)
    //        \         /
    //         d (notify)
    const Diamond = defineWorkflow('diamond')
      .step('a', 'fetch')
      .step('b', 'score', { after: ['a'], queue: 'fast', priority: -7, maxAttempts: 9, timeout: '2m', maxReclaims: 0 })
      .waitForSignal('approval', { after: ['a'], timeout: '2d', onTimeout: 'continue' })
      .sleep('cooldown', '10m', { after: ['approval'] })
      .step('d', 'notify', { after: ['b', 'cooldown'], priority: 1000, timeout: 1_500 });

    const compile = (): CompiledWorkflow => compileWorkflow(Diamond, registry, module);

    it('gives one row per node, in declaration order, with its type, kind and upstream nodes', () => {
      const compiled = compile();
      expect(compiled.name).toBe('diamond');
      expect(compiled.nodes.map((n) => [n.node_id, n.node_type, n.kind, n.depends_on])).toEqual([
        ['a', 'step', 'fetch', []],
        ['b', 'step', 'score', ['a']],
        ['approval', 'signal', null, ['a']],
        ['cooldown', 'sleep', null, ['approval']],
        ['d', 'step', 'notify', ['b', 'cooldown']],
      ]);
    });

    it('takes a step node\'s options over the step defaults, and the defaults where the node says nothing', () => {
      const compiled = compile();
      const row = (id: string) => compiled.nodes.find((n) => n.node_id === id)!;
      // a: everything from @Step('fetch').
      expect(row('a')).toMatchObject({ queue: 'bulk', priority: 5, max_attempts: 3, timeout_ms: 30_000, max_reclaims: 2 });
      // b: every option from the node ('2m' in ms); score has no defaults of its own.
      expect(row('b')).toMatchObject({ queue: 'fast', priority: -7, max_attempts: 9, timeout_ms: 120_000, max_reclaims: 0 });
      // d: priority and timeout from the node, queue and maxAttempts from @Step('notify'), no module maxReclaims.
      expect(row('d')).toMatchObject({ queue: 'mail', priority: 1000, max_attempts: 4, timeout_ms: 1_500, max_reclaims: null });
    });

    it('puts the run, and its signal and sleep nodes (never claimed), on the queue of the first step node', () => {
      const compiled = compile();
      expect(compiled.queue).toBe('bulk');
      const waits = compiled.nodes.filter((n) => n.node_type !== 'step');
      expect(waits.map((n) => n.queue)).toEqual(['bulk', 'bulk']);
    });

    it('stores a graph with every node, its upstream nodes, the sleep in ms and the signal timeout and onTimeout', () => {
      const compiled = compile();
      expect(compiled.graph).toEqual({
        nodes: {
          a: { type: 'step', kind: 'fetch', after: [] },
          b: { type: 'step', kind: 'score', after: ['a'] },
          approval: { type: 'signal', after: ['a'], timeoutMs: 2 * 86_400_000, onTimeout: 'continue' },
          cooldown: { type: 'sleep', after: ['approval'], sleepMs: 600_000 },
          d: { type: 'step', kind: 'notify', after: ['b', 'cooldown'] },
        },
      });
      // It is stored with each run as JSON: it must survive the trip.
      expect(JSON.parse(JSON.stringify(compiled.graph))).toEqual(compiled.graph);
    });
  });

  it('uses the default attempt count and the module maxReclaims when neither the node nor the step sets them', () => {
    const compiled = compileWorkflow(defineWorkflow('defaults').step('only', 'score'), registry, resolveOptions({ maxReclaims: 6 }));
    expect(compiled.nodes).toEqual([
      {
        node_id: 'only',
        node_type: 'step',
        kind: 'score',
        depends_on: [],
        queue: 'default',
        priority: 0,
        max_attempts: 5,
        max_reclaims: 6,
        timeout_ms: null,
      },
    ]);
    expect(compiled.queue).toBe('default');
  });

  it('a signal wait without a timeout waits forever and fails on timeout by default; a workflow of waits only runs on the default queue', () => {
    const compiled = compileWorkflow(
      defineWorkflow('waits').waitForSignal('go').sleep('nap', 250, { after: ['go'] }),
      registry,
      module,
    );
    expect(compiled.graph.nodes.go).toEqual({ type: 'signal', after: [], onTimeout: 'fail' });
    expect(compiled.graph.nodes.nap).toEqual({ type: 'sleep', after: ['go'], sleepMs: 250 });
    expect(compiled.queue).toBe('default');
    expect(compiled.nodes.map((n) => [n.node_id, n.kind, n.queue])).toEqual([
      ['go', null, 'default'],
      ['nap', null, 'default'],
    ]);
  });

  it('the run queue is that of the first step node even when a wait is declared before it', () => {
    const compiled = compileWorkflow(
      defineWorkflow('late-step').waitForSignal('go').step('x', 'notify', { after: ['go'] }),
      registry,
      module,
    );
    expect(compiled.queue).toBe('mail');
    expect(compiled.nodes.find((n) => n.node_id === 'go')!.queue).toBe('mail');
  });

  it('lets a node name an upstream node declared after it: only the edges matter, not the declaration order', () => {
    const compiled = compileWorkflow(
      defineWorkflow('backwards').step('last', 'notify', { after: ['first'] }).step('first', 'fetch'),
      registry,
      module,
    );
    expect(compiled.graph.nodes).toEqual({
      last: { type: 'step', kind: 'notify', after: ['first'] },
      first: { type: 'step', kind: 'fetch', after: [] },
    });
    expect(compiled.nodes.map((n) => n.node_id)).toEqual(['last', 'first']);
  });

  it('an upstream node listed twice is one edge', () => {
    const compiled = compileWorkflow(
      defineWorkflow('twice').step('a', 'score').step('b', 'score', { after: ['a', 'a'] }),
      registry,
      module,
    );
    expect(compiled.nodes[1].depends_on).toEqual(['a']);
    expect(compiled.graph.nodes.b.after).toEqual(['a']);
  });

  it('accepts a step given by a typed reference and a node id of exactly 200 characters', () => {
    const id = 'n'.repeat(200);
    const compiled = compileWorkflow(
      defineWorkflow('refs').step(id, defineStep('score')),
      registry,
      module,
    );
    expect(compiled.nodes[0]).toMatchObject({ node_id: id, kind: 'score' });
  });

  describe('refuses', () => {
    it('a cycle of two nodes, showing the path', () => {
      const err = rejection(
        defineWorkflow('loop').step('a', 'score', { after: ['b'] }).step('b', 'score', { after: ['a'] }),
      );
      expect(['a', 'b']).toContain(err.nodeId);
      expectNamesNode(err, 'loop', err.nodeId!);
      expect(err.message).toMatch(/a → b → a|b → a → b/);
      expect(err.message).toMatch(/cycle/);
    });

    it('a longer cycle behind a valid root, showing the whole path in the order the nodes would run', () => {
      // root → x → y → z → x
      const err = rejection(
        defineWorkflow('spiral')
          .step('root', 'fetch')
          .step('x', 'score', { after: ['root', 'z'] })
          .step('y', 'score', { after: ['x'] })
          .step('z', 'score', { after: ['y'] })
          .step('sink', 'notify', { after: ['z'] }),
      );
      expect(['x', 'y', 'z']).toContain(err.nodeId);
      expectNamesNode(err, 'spiral', err.nodeId!);
      expect(err.message).toMatch(/x → y → z → x|y → z → x → y|z → x → y → z/);
      expect(err.message).not.toContain('root →');
    });

    it('a node that depends on itself', () => {
      const err = rejection(defineWorkflow('selfish').step('a', 'score').step('b', 'score', { after: ['a', 'b'] }));
      expectNamesNode(err, 'selfish', 'b');
      expect(err.message).toMatch(/itself/);
    });

    it('a signal wait that depends on itself', () => {
      const err = rejection(defineWorkflow('selfish-wait').waitForSignal('w', { after: ['w'] }));
      expectNamesNode(err, 'selfish-wait', 'w');
    });

    it('an `after` that names no node of the workflow, naming the node and the unknown target', () => {
      const err = rejection(
        defineWorkflow('dangling').step('a', 'score').sleep('nap', '1s', { after: ['a', 'aa'] }),
      );
      expectNamesNode(err, 'dangling', 'nap');
      expect(err.message).toContain('"aa"');
    });

    it('an `after` that is not an array of node ids', () => {
      const err = rejection(defineWorkflow('not-array').step('a', 'score').step('b', 'score', loose({ after: 'a' })));
      expectNamesNode(err, 'not-array', 'b');
      expect(err.message).toContain('"after"');
    });

    it('two nodes with the same id, whatever their types', () => {
      const steps = rejection(defineWorkflow('dupes').step('a', 'score').step('b', 'score').step('a', 'fetch'));
      expectNamesNode(steps, 'dupes', 'a');
      expect(steps.message).toMatch(/twice|unique/);
      const mixed = rejection(defineWorkflow('dupes-mixed').step('x', 'score').sleep('x', '1m', { after: [] }));
      expectNamesNode(mixed, 'dupes-mixed', 'x');
    });

    it.each([
      ['empty', ''],
      ['blank', '   '],
      ['over 200 characters', 'n'.repeat(201)],
    ])('a node id that is %s', (_what, id) => {
      const err = rejection(defineWorkflow('ids').step('ok', 'score').step(id, 'score'));
      expectNamesNode(err, 'ids', id);
      expect(err.message).toMatch(/non-empty/);
      expect(err.message).toContain('200');
    });

    it('a node id that is not a string', () => {
      const err = rejection(defineWorkflow('ids').step(loose(42), 'score'));
      expect(err.message).toContain('node "42"');
    });

    it('a step kind nobody registered, naming the node, the kind and the fix', () => {
      const err = rejection(
        defineWorkflow('typo').step('a', 'fetch').step('mail', 'notfy', { after: ['a'] }),
      );
      expectNamesNode(err, 'typo', 'mail');
      expect(err.message).toContain('"notfy"');
      expect(err.message).toContain("@Step('notfy')");
    });

    it.each<[string, WorkflowDefinition, string, string]>([
      ['a step node', defineWorkflow('keys').step('a', 'score', loose({ retries: 3 })), 'a', '"retries"'],
      [
        'a step node (enqueue-only options such as unique are not node options)',
        defineWorkflow('keys').step('a', 'score', loose({ unique: 'k' })),
        'a',
        '"unique"',
      ],
      ['a signal node', defineWorkflow('keys').waitForSignal('w', loose({ timout: '1h' })), 'w', '"timout"'],
      ['a sleep node (a sleep takes only after)', defineWorkflow('keys').sleep('s', '1m', loose({ timeout: '1h' })), 's', '"timeout"'],
    ])('an unknown option key on %s, naming the node and the key', (_what, def, nodeId, key) => {
      const err = rejection(def);
      expectNamesNode(err, 'keys', nodeId);
      expect(err.message).toContain(key);
    });

    it.each<[string, Record<string, unknown>, string]>([
      ['priority above 1000', { priority: 1_001 }, '"priority"'],
      ['priority below -1000', { priority: -1_001 }, '"priority"'],
      ['a fractional priority', { priority: 1.5 }, '"priority"'],
      ['maxAttempts 0', { maxAttempts: 0 }, '"maxAttempts"'],
      ['negative maxReclaims', { maxReclaims: -1 }, '"maxReclaims"'],
      ['a zero timeout', { timeout: 0 }, '"timeout"'],
      ["a zero timeout as '0s'", { timeout: '0s' }, '"timeout"'],
      ['a negative timeout', { timeout: -5 }, '"timeout"'],
      ['an unparsable timeout', { timeout: 'soon' }, '"timeout"'],
      ['a timeout with an unknown unit', { timeout: '5 parsecs' }, '"timeout"'],
      ['an empty queue name', { queue: '' }, '"queue"'],
    ])('a step node with %s, naming the node and the option', (_what, options, option) => {
      const err = rejection(defineWorkflow('values').step('ok', 'score').step('bad', 'score', loose({ after: ['ok'], ...options })));
      expectNamesNode(err, 'values', 'bad');
      expect(err.message).toContain(option);
    });

    it.each<[string, Record<string, unknown>, string]>([
      ['a zero timeout', { timeout: 0 }, '"timeout"'],
      ['an unparsable timeout', { timeout: 'two days' }, '"timeout"'],
      ['a negative timeout', { timeout: '-1h' }, '"timeout"'],
      ["onTimeout 'retry'", { onTimeout: 'retry' }, 'onTimeout'],
      ['onTimeout true', { onTimeout: true }, 'onTimeout'],
    ])('a signal node with %s, naming the node and the option', (_what, options, option) => {
      const err = rejection(defineWorkflow('values').waitForSignal('approval', loose(options)));
      expectNamesNode(err, 'values', 'approval');
      expect(err.message).toContain(option);
    });

    it.each<[string, unknown]>([
      ['an unparsable duration', 'a while'],
      ['a duration with an unknown unit', '5 parsecs'],
      ['an empty duration', ''],
      ['a negative duration', -1],
      ['a negative duration string', '-5m'],
      ['NaN', NaN],
      ['over 100 years', '1000000d'],
    ])('a sleep node with %s, naming the node', (_what, duration) => {
      const err = rejection(defineWorkflow('naps').step('a', 'score').sleep('nap', loose(duration), { after: ['a'] }));
      expectNamesNode(err, 'naps', 'nap');
      expect(err.message).toContain('sleep duration');
    });

    it('a workflow with no nodes, naming the workflow', () => {
      const err = rejection(defineWorkflow('hollow'));
      expect(err.workflow).toBe('hollow');
      expect(err.nodeId).toBeNull();
      expect(err.message).toContain('Workflow "hollow"');
      expect(err.message).toMatch(/no nodes/);
    });

    it.each([
      ['empty', ''],
      ['blank', '  '],
      ['over 200 characters', 'w'.repeat(201)],
    ])('a workflow name that is %s', (_what, name) => {
      const err = rejection(defineWorkflow(name).step('a', 'score'));
      expect(err.nodeId).toBeNull();
      expect(err.message).toMatch(/name/);
    });

    it('a workflow name that is not a string', () => {
      const err = rejection(defineWorkflow(loose(undefined)).step('a', 'score'));
      expect(err.message).toMatch(/name/);
    });
  });
});
