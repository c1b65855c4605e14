import { checkInteger, checkOptions } from '../../common/validate.js';
import { DEFAULT_MAX_NODES, MAX_NODES_LIMIT } from '../../cyclone.constants.js';
import { InvalidOptionError } from '../../errors/invalid-option.error.js';
import { WORKFLOW_OPTION_NAMES, type WorkflowOptions } from '../../interfaces/code-workflow-options.interface.js';
import { resolveStepOptions } from '../../steps/step-options.js';
import type { RegisteredStep } from '../../steps/registered-step.js';

/** The largest version we accept: a version is compared, never stored as more than an integer. */
const MAX_VERSION = 2_147_483_647;

type NodeDefaults = Omit<RegisteredStep, 'kind' | 'host' | 'handler'>;

/**
 * Checks a `@Workflow`'s options, naming the workflow in any error: the
 * options its node shares with a step's (checked as a step's are), its
 * version and its node limit.
 */
export function resolveWorkflowOptions(
  name: string,
  given: WorkflowOptions | undefined,
): { version: number; maxNodes: number; node: NodeDefaults } {
  const where = `@Workflow('${name}')`;
  const { version, maxNodes, ...nodeOptions } = checkOptions<WorkflowOptions>(given, `${where} options`, WORKFLOW_OPTION_NAMES);
  const node = resolveStepOptions(name, nodeOptions, 'Workflow');
  try {
    return {
      version: version === undefined ? 1 : checkInteger(version, 'version', 1, MAX_VERSION),
      maxNodes: maxNodes === undefined ? DEFAULT_MAX_NODES : checkInteger(maxNodes, 'maxNodes', 1, MAX_NODES_LIMIT),
      node,
    };
  } catch (err) {
    if (err instanceof InvalidOptionError) throw new InvalidOptionError(`${where}: ${err.message}`);
    throw err;
  }
}
