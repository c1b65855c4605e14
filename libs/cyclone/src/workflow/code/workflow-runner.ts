import { Inject, Injectable, Logger } from '@nestjs/common';
import { CYCLONE_OPTIONS } from '../../cyclone.constants.js';
import { CycloneDatabase } from '../../database/cyclone-database.js';
import type { StepContext } from '../../interfaces/step-context.interface.js';
import type { ResolvedOptions } from '../../options/resolved-options.js';
import { CycloneStats } from '../../runtime/cyclone-stats.js';
import { StepRegistry } from '../../steps/step-registry.js';
import { WorkflowRegistry } from '../workflow-registry.js';
import { CodeWorkflowRegistry } from './code-workflow-registry.js';
import type { RegisteredWorkflow } from './registered-workflow.js';
import { WorkflowContextImpl } from './workflow-context.js';
import { WorkflowPass } from './workflow-pass.js';

/**
 * Runs the passes of code workflows: the handler of a claimed workflow node.
 * The run's version is read back with its history; a pass sees the version
 * its run recorded (`wf.version`), which may be older than this client's.
 */
@Injectable()
export class WorkflowRunner {
  constructor(
    private readonly database: CycloneDatabase,
    private readonly stats: CycloneStats,
    private readonly steps: StepRegistry,
    private readonly codeWorkflows: CodeWorkflowRegistry,
    private readonly dagWorkflows: WorkflowRegistry,
    @Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions,
  ) {}

  /** One pass of `workflow` for its claimed node (`ctx`): the method's output, or a PassEnded. */
  run(workflow: RegisteredWorkflow, input: unknown, ctx: StepContext): Promise<unknown> {
    const logger = new Logger(`Cyclone:${workflow.name}`);
    const pass = new WorkflowPass(
      workflow,
      ctx,
      {
        database: this.database,
        owner: this.stats.clientId,
        steps: this.steps,
        codeWorkflows: this.codeWorkflows,
        dagWorkflows: this.dagWorkflows,
        module: this.options,
        logger,
      },
      logger,
    );
    return pass.run(input, (version: number) => new WorkflowContextImpl(pass, ctx.runId, workflow.name, version, input, logger));
  }
}
