export { CycloneModule } from './module/cyclone.module.js';
export { CYCLONE_MODULE_OPTIONS } from './module/cyclone.module-definition.js';
export { CycloneClient, type ResultOptions } from './client/cyclone.client.js';
export { CycloneDatabase } from './database/cyclone-database.js';
export { CycloneStats, type LoopState, type ClusterSample, type QueueSample } from './runtime/cyclone-stats.js';
export { CycloneErrorFilter, CYCLONE_ERROR_STATUS } from './http/cyclone-error.filter.js';
export { Step } from './decorators/step.decorator.js';
export { Workflow } from './decorators/workflow.decorator.js';
export { OnStepEvent } from './decorators/on-step-event.decorator.js';
export { defineStep, type StepRef, type StepInput, type StepOutput } from './definitions/define-step.js';
export { Snooze } from './interfaces/snooze.js';
export { defineWorkflow, WorkflowDefinition, type WorkflowNode } from './definitions/define-workflow.js';
export { CYCLONE_MIGRATIONS } from './schema/migrations.js';
export {
  RUN_STATES,
  STEP_STATES,
  NODE_TYPES,
  ERROR_KINDS,
  WAKE_CHANNEL,
  RUN_FINISHED_CHANNEL,
} from './sql/names.js';
export type { Duration } from './common/duration.js';
export * from './errors/index.js';
export * from './interfaces/index.js';
export * from './options/cyclone-module-options.interface.js';
