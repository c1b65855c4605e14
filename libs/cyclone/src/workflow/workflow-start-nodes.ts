import type { Logger } from '@nestjs/common';
import { flowKeys } from '../steps/flow-limits.js';
import { backoffSchedule } from '../steps/retry-policy.js';
import type { StepRegistry } from '../steps/step-registry.js';
import type { CompiledWorkflow } from './compile-workflow.js';

/**
 * The node rows of a new run of a DAG workflow: each step node carries its
 * kind's backoff, as a standalone job does, and the keys its kind's limits
 * give for the run's input.
 */
export function workflowStartNodes(compiled: CompiledWorkflow, steps: StepRegistry, input: unknown, logger: Logger) {
  return compiled.nodes.map((node) => {
    const step = node.kind === null ? undefined : steps.find(node.kind);
    if (!step) return node;
    const backoff = backoffSchedule(step, node.max_attempts, logger);
    const [flow_key, rate_key] = flowKeys(step.kind, step.flow, input);
    return { ...node, ...(backoff === null ? {} : { backoff_ms: backoff }), ...(step.flow ? { flow_key, rate_key } : {}) };
  });
}
