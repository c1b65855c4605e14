import { optionalPositiveMs, toMs } from '../common/duration.js';
import { checkKnownKeys, checkName } from '../common/validate.js';
import { DEFAULT_QUEUE } from '../cyclone.constants.js';
import { InvalidWorkflowError } from '../errors/invalid-workflow.error.js';
import {
  SIGNAL_WAIT_OPTION_NAMES,
  SLEEP_OPTION_NAMES,
  WORKFLOW_STEP_OPTION_NAMES,
} from '../interfaces/workflow-options.interface.js';
import { jobParams } from '../steps/job-params.js';
import { describeValue } from '../cyclone.messages.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import type { StepRegistry } from '../steps/step-registry.js';
import type { WorkflowDefinition, WorkflowNode } from '../definitions/define-workflow.js';

/** One node's row in cyclone_steps, as cyclone_start_workflow reads it. */
export interface NodeRow {
  node_id: string;
  kind: string | null;
  node_type: WorkflowNode['type'];
  queue: string;
  priority: number;
  depends_on: string[];
  max_attempts: number;
  max_reclaims: number | null;
  timeout_ms: number | null;
}

/** What routing reads from the run's stored graph. */
export interface GraphNode {
  type: WorkflowNode['type'];
  kind?: string;
  after: string[];
  sleepMs?: number;
  timeoutMs?: number;
  onTimeout?: 'fail' | 'continue';
}

/** A checked workflow, ready to start runs of. */
export interface CompiledWorkflow {
  name: string;
  definition: WorkflowDefinition;
  /** Stored with each run. */
  graph: { nodes: Record<string, GraphNode> };
  /** In declaration order. */
  nodes: NodeRow[];
  /** The run's queue: that of its first step node. */
  queue: string;
}

/**
 * Checks a workflow against the steps this app registered and turns it into
 * rows: duplicate or malformed node ids, unknown `after` targets, cycles,
 * unknown step kinds and bad node options are refused, each naming the node.
 */
export function compileWorkflow(
  def: WorkflowDefinition,
  registry: StepRegistry,
  module: ResolvedOptions,
): CompiledWorkflow {
  const name = def?.name;
  const nameProblem = problemOf(() => checkName(name, 'name'));
  if (nameProblem) throw new InvalidWorkflowError(typeof name === 'string' ? name : describeValue(name), null, nameProblem);
  const fail = (nodeId: string | null, problem: string) => new InvalidWorkflowError(name, nodeId, problem);
  if (def.nodes.length === 0) throw fail(null, 'it has no nodes; add one with .step(), .waitForSignal() or .sleep().');

  const ids = new Set<string>();
  for (const node of def.nodes) {
    const idProblem = problemOf(() => checkName(node.id, 'node id'));
    if (idProblem) throw fail(typeof node.id === 'string' ? node.id : describeValue(node.id), idProblem);
    if (ids.has(node.id)) throw fail(node.id, 'this node id is used twice; node ids must be unique.');
    ids.add(node.id);
  }

  const after = new Map<string, string[]>();
  for (const node of def.nodes) {
    const upstream = node.options?.after ?? [];
    if (!Array.isArray(upstream) || upstream.some((u) => typeof u !== 'string')) {
      throw fail(node.id, '"after" must be an array of node ids.');
    }
    for (const u of upstream) {
      if (u === node.id) throw fail(node.id, 'it lists itself in "after".');
      if (!ids.has(u)) throw fail(node.id, `"after" names "${u}", which is not a node of this workflow.`);
    }
    after.set(node.id, [...new Set(upstream)]);
  }
  const cycle = findCycle(after);
  if (cycle) throw fail(cycle[0], `the graph has a cycle: ${cycle.join(' → ')}.`);

  const rows: NodeRow[] = [];
  const graph: Record<string, GraphNode> = {};
  let runQueue: string | undefined;
  for (const node of def.nodes) {
    const upstream = after.get(node.id)!;
    try {
      const { row, graphNode } = compileNode(node, upstream, registry, module);
      runQueue ??= node.type === 'step' ? row.queue : undefined;
      rows.push(row);
      graph[node.id] = graphNode;
    } catch (err) {
      throw fail(node.id, (err as Error).message);
    }
  }
  const queue = runQueue ?? DEFAULT_QUEUE;
  // Signal and sleep nodes are never claimed; they sit on the run's queue.
  for (const row of rows) if (row.node_type !== 'step') row.queue = queue;
  return { name, definition: def, graph: { nodes: graph }, nodes: rows, queue };
}

function compileNode(
  node: WorkflowNode,
  after: string[],
  registry: StepRegistry,
  module: ResolvedOptions,
): { row: NodeRow; graphNode: GraphNode } {
  const base = {
    node_id: node.id,
    node_type: node.type,
    depends_on: after,
    kind: null,
    queue: DEFAULT_QUEUE,
    priority: 0,
    max_attempts: 1,
    max_reclaims: null,
    timeout_ms: null,
  };
  const where = `the options of node "${node.id}"`;
  switch (node.type) {
    case 'step': {
      checkKnownKeys(where, node.options, WORKFLOW_STEP_OPTION_NAMES);
      const step = registry.find(node.kind);
      if (!step) {
        throw new Error(
          `step kind "${node.kind}" has no handler in this app. Decorate a method with @Step('${node.kind}') ` +
            'in a provider the app imports.',
        );
      }
      const { after: _after, ...enqueueOptions } = node.options;
      const p = jobParams(step, enqueueOptions, module);
      return {
        row: {
          ...base,
          kind: p.kind,
          queue: p.queue,
          priority: p.priority,
          max_attempts: p.maxAttempts,
          max_reclaims: p.maxReclaims,
          timeout_ms: p.timeoutMs,
        },
        graphNode: { type: 'step', kind: p.kind, after },
      };
    }
    case 'signal': {
      checkKnownKeys(where, node.options, SIGNAL_WAIT_OPTION_NAMES);
      const onTimeout = node.options.onTimeout ?? 'fail';
      if (onTimeout !== 'fail' && onTimeout !== 'continue') {
        throw new Error(`option "onTimeout" must be 'fail' or 'continue'; got ${JSON.stringify(onTimeout)}.`);
      }
      const timeoutMs = optionalPositiveMs(node.options.timeout, 'timeout');
      return {
        row: base,
        graphNode: { type: 'signal', after, ...(timeoutMs === undefined ? {} : { timeoutMs }), onTimeout },
      };
    }
    case 'sleep': {
      checkKnownKeys(where, node.options, SLEEP_OPTION_NAMES);
      return { row: base, graphNode: { type: 'sleep', after, sleepMs: toMs(node.duration, 'sleep duration') } };
    }
    default:
      throw new Error(`unknown node type ${JSON.stringify((node as { type: unknown }).type)}.`);
  }
}

/** A cycle as a path that starts and ends at the same node, or undefined. */
function findCycle(after: Map<string, string[]>): string[] | undefined {
  const done = new Set<string>();
  const path: string[] = [];
  const onPath = new Set<string>();
  const visit = (id: string): string[] | undefined => {
    if (onPath.has(id)) return [...path.slice(path.indexOf(id)), id];
    if (done.has(id)) return undefined;
    onPath.add(id);
    path.push(id);
    for (const u of after.get(id) ?? []) {
      const cycle = visit(u);
      if (cycle) return cycle;
    }
    path.pop();
    onPath.delete(id);
    done.add(id);
    return undefined;
  };
  for (const id of after.keys()) {
    const cycle = visit(id);
    if (cycle) return cycle.reverse();
  }
  return undefined;
}

/** The message of the InvalidOptionError `check` throws, or undefined. */
function problemOf(check: () => unknown): string | undefined {
  try {
    check();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}
