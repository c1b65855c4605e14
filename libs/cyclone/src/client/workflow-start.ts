import type { Logger } from '@nestjs/common';
import { optionalMs } from '../common/duration.js';
import { checkOptions, toJson } from '../common/validate.js';
import type { CycloneDatabase } from '../database/cyclone-database.js';
import { WorkflowDefinition } from '../definitions/define-workflow.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { START_OPTION_NAMES, type StartOptions } from '../interfaces/workflow-options.interface.js';
import type { ResolvedOptions } from '../options/resolved-options.js';
import { START_CODE_WORKFLOW } from '../sql/code-workflow.sql.js';
import { START_WORKFLOW } from '../sql/workflow.sql.js';
import { jobParams, uniqueOptions } from '../steps/job-params.js';
import { backoffSchedule } from '../steps/retry-policy.js';
import type { StepRegistry } from '../steps/step-registry.js';
import type { CodeWorkflowRegistry } from '../workflow/code/code-workflow-registry.js';
import type { WorkflowRegistry } from '../workflow/workflow-registry.js';
import { workflowStartNodes } from '../workflow/workflow-start-nodes.js';

/** A start checked and ready to write: which workflow, and the statement that starts its run. */
export interface PreparedStart {
  name: string;
  queue: string;
  uniqueKey: string | null;
  onConflict: 'error' | 'keep';
  /** Inserts the run under `runId`; its id, or null when the unique key is held. */
  insert(database: CycloneDatabase, runId: string, traceContext: string | null): Promise<string | null>;
}

export interface StartTargets {
  steps: StepRegistry;
  dagWorkflows: WorkflowRegistry;
  codeWorkflows: CodeWorkflowRegistry;
  module: ResolvedOptions;
  logger: Logger;
}

/**
 * Checks a start of a workflow (by name, by its DAG definition, or by the
 * typed reference of a workflow written as code) and its options, before
 * anything is written.
 */
export function prepareStart(workflow: unknown, input: unknown, given: StartOptions | undefined, targets: StartTargets): PreparedStart {
  const { steps, dagWorkflows, codeWorkflows, module, logger } = targets;
  const code = codeWorkflows.find(referencedName(workflow));
  const compiled = code ? undefined : dagWorkflows.get(workflow as WorkflowDefinition | string);
  const opts = checkOptions<StartOptions>(given, 'start options', START_OPTION_NAMES);
  const unique = uniqueOptions(opts.unique);
  if (unique.onConflict === 'replace' || unique.debounceMs !== null) {
    throw new InvalidOptionError(
      "Options unique.onConflict 'replace' and unique.debounce are for standalone jobs (enqueue); a workflow run takes 'error' or 'keep'.",
    );
  }
  const retentionMs = optionalMs(opts.retention, 'retention');
  const inputJson = toJson(input, 'input', module.maxPayloadBytes);
  const common = { uniqueKey: unique.key, onConflict: unique.onConflict === 'keep' ? 'keep' : 'error' } as const;
  if (code) {
    // The workflow's node takes the workflow's options as a step takes its kind's.
    const p = jobParams(code.step, {}, module);
    const backoff = backoffSchedule(code.step, p.maxAttempts, logger);
    return {
      ...common,
      name: code.name,
      queue: p.queue,
      insert: async (database, runId, traceContext) =>
        (
          await database.query(START_CODE_WORKFLOW, [
            runId,
            code.name,
            code.version,
            inputJson,
            p.queue,
            p.priority,
            unique.key,
            retentionMs ?? p.retentionMs,
            p.maxAttempts,
            p.maxReclaims,
            p.timeoutMs,
            backoff,
            traceContext,
          ])
        ).rows[0].id,
    };
  }
  const dag = compiled!;
  const nodes = workflowStartNodes(dag, steps, input, logger);
  return {
    ...common,
    name: dag.name,
    queue: dag.queue,
    insert: async (database, runId, traceContext) =>
      (
        await database.query(START_WORKFLOW, [
          runId,
          dag.name,
          JSON.stringify(dag.graph),
          inputJson,
          dag.queue,
          unique.key,
          retentionMs ?? module.retentionMs,
          JSON.stringify(nodes),
          traceContext,
        ])
      ).rows[0].id,
  };
}

/**
 * The name a start refers to a workflow written as code by: a name, or a
 * definition without nodes (a typed reference); undefined for a DAG.
 */
function referencedName(workflow: unknown): string | undefined {
  if (typeof workflow === 'string') return workflow;
  try {
    if (workflow instanceof WorkflowDefinition && workflow.nodes.length === 0) return workflow.name;
  } catch {
    // A proxy whose traps throw: dagWorkflows.get describes it.
  }
  return undefined;
}
