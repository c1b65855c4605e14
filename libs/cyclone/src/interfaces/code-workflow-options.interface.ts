import type { Duration } from '../common/duration.js';
import type { BackoffFunction } from './step-options.interface.js';

/**
 * Options of a workflow written as code (`@Workflow(name, options)`). The
 * workflow's own node (its method's passes) is claimed like a step, with
 * these as its step options.
 */
export interface WorkflowOptions {
  /** The queue its method runs on. Default `default`. */
  queue?: string;
  /**
   * The version of the workflow's code, an integer from 1 (the default). A
   * run records the version that started it; a client runs runs of its
   * version and older ones, and leaves newer ones to a client that has them.
   * Raise it with a change that older code cannot replay; use `wf.patched`
   * so that runs started before the change keep their path.
   */
  version?: number;
  priority?: number;
  /** The timeout of one pass of the method (a replay and what follows it), not of the whole run. */
  timeout?: Duration;
  /**
   * Passes that may fail (the method throws) before the run fails. Default 5.
   * A method that throws the StepFailedError of a recorded node fails at once:
   * a replay would throw it again.
   */
  maxAttempts?: number;
  backoff?: BackoffFunction;
  retention?: Duration;
  maxReclaims?: number;
  /** The most nodes a run may record; one more fails the run with NodeLimitError. Default 10,000. */
  maxNodes?: number;
}

export const WORKFLOW_OPTION_NAMES = [
  'queue',
  'version',
  'priority',
  'timeout',
  'maxAttempts',
  'backoff',
  'retention',
  'maxReclaims',
  'maxNodes',
] as const;
