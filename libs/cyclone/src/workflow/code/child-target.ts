import type { Logger } from '@nestjs/common';
import { optionalMs } from '../../common/duration.js';
import { checkOptions } from '../../common/validate.js';
import { messages } from '../../cyclone.messages.js';
import { WorkflowDefinition } from '../../definitions/define-workflow.js';
import { InvalidOptionError } from '../../errors/invalid-option.error.js';
import type { ChildOptions } from '../../interfaces/workflow-context.interface.js';
import type { ResolvedOptions } from '../../options/resolved-options.js';
import { flowKeys } from '../../steps/flow-limits.js';
import { jobParams } from '../../steps/job-params.js';
import { backoffSchedule } from '../../steps/retry-policy.js';
import type { StepRegistry } from '../../steps/step-registry.js';
import type { WorkflowRegistry } from '../workflow-registry.js';
import { workflowStartNodes } from '../workflow-start-nodes.js';
import type { CodeWorkflowRegistry } from './code-workflow-registry.js';

const CHILD_OPTION_NAMES = ['queue', 'priority', 'timeout', 'maxAttempts', 'maxReclaims', 'retention'] as const;
/** A child workflow runs with its own workflow's options; only how long it is kept is the caller's. */
const WORKFLOW_CHILD_OPTION_NAMES = ['retention'] as const;

export interface ChildTargets {
  steps: StepRegistry;
  codeWorkflows: CodeWorkflowRegistry;
  dagWorkflows: WorkflowRegistry;
  module: ResolvedOptions;
  logger: Logger;
}

/** What cyclone_record_nodes needs to start a child run, and the name its node records. */
export interface ChildSpec {
  kind: string;
  fields: Record<string, unknown>;
}

/**
 * The run `wf.startChild` starts: a workflow written as code, a DAG
 * workflow, or a step kind (a standalone job), by reference or by name
 * (looked up in that order), with the options checked as a start or an
 * enqueue checks them.
 */
export function childSpec(target: unknown, input: unknown, given: ChildOptions | undefined, targets: ChildTargets, where: string): ChildSpec {
  const { steps, codeWorkflows, dagWorkflows, module, logger } = targets;
  const options = checkOptions<ChildOptions>(given, where, CHILD_OPTION_NAMES);
  const dag = target instanceof WorkflowDefinition && target.nodes.length > 0 ? dagWorkflows.get(target) : undefined;
  const name = nameOf(target);
  const code = dag || isStepRef(target) ? undefined : codeWorkflows.find(name);
  const namedDag = dag ?? (code || isStepRef(target) || typeof name !== 'string' ? undefined : dagWorkflows.find(name));
  const workflowOptions = () => checkOptions<ChildOptions>(options, where, WORKFLOW_CHILD_OPTION_NAMES);
  if (code) {
    const p = jobParams(code.step, workflowOptions(), module, where);
    return {
      kind: code.name,
      fields: {
        child: 'code',
        version: code.version,
        queue: p.queue,
        priority: p.priority,
        max_attempts: p.maxAttempts,
        max_reclaims: p.maxReclaims,
        timeout_ms: p.timeoutMs,
        backoff_ms: backoffSchedule(code.step, p.maxAttempts, logger),
        retention_ms: p.retentionMs,
      },
    };
  }
  if (namedDag) {
    const retentionMs = optionalMs(workflowOptions().retention, 'retention') ?? module.retentionMs;
    return {
      kind: namedDag.name,
      fields: {
        child: 'dag',
        graph: namedDag.graph,
        nodes: workflowStartNodes(namedDag, steps, input, logger),
        queue: namedDag.queue,
        retention_ms: retentionMs,
      },
    };
  }
  const step = typeof name === 'string' ? steps.find(name) : undefined;
  if (!step) throw new InvalidOptionError(messages.unknownChildTarget(typeof name === 'string' ? name : String(name)));
  const p = jobParams(step, options, module, where);
  const [flowKey, rateKey] = flowKeys(step.kind, step.flow, input);
  return {
    kind: step.kind,
    fields: {
      child: 'job',
      queue: p.queue,
      priority: p.priority,
      max_attempts: p.maxAttempts,
      max_reclaims: p.maxReclaims,
      timeout_ms: p.timeoutMs,
      backoff_ms: backoffSchedule(step, p.maxAttempts, logger),
      flow_key: flowKey,
      rate_key: rateKey,
      retention_ms: p.retentionMs,
    },
  };
}

function isStepRef(target: unknown): boolean {
  return typeof target === 'object' && target !== null && !(target instanceof WorkflowDefinition) && 'kind' in target;
}

function nameOf(target: unknown): unknown {
  if (typeof target === 'string') return target;
  if (target instanceof WorkflowDefinition) return target.name;
  return isStepRef(target) ? (target as { kind: unknown }).kind : target;
}
