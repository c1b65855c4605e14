import { optionalMs, optionalPositiveMs } from '../common/duration.js';
import { checkInteger, checkName, checkOptions } from '../common/validate.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { MAX_ATTEMPTS_LIMIT, MAX_PRIORITY, MIN_PRIORITY } from '../cyclone.constants.js';
import type { StepOptions } from '../interfaces/step-options.interface.js';
import type { RegisteredStep } from './registered-step.js';
import { describeValue } from '../cyclone.messages.js';
import { resolveFlowLimits } from './flow-limits.js';

const KNOWN = [
  'queue',
  'priority',
  'timeout',
  'maxAttempts',
  'backoff',
  'retention',
  'maxReclaims',
  'concurrency',
  'rateLimit',
  'schedule',
] as const;

type StepDefaults = Omit<RegisteredStep, 'kind' | 'host' | 'handler'>;

/**
 * Checks a kind's `@Step` options, naming the kind in any error (as
 * `@Workflow` when they are a workflow's node's, `decorator`).
 */
export function resolveStepOptions(kind: string, given: StepOptions | undefined, decorator = 'Step'): StepDefaults {
  const where = `@${decorator}(${typeof kind === 'string' ? `'${kind}'` : describeValue(kind)})`;
  try {
    checkName(kind, 'kind');
    const options = checkOptions<StepOptions>(given, `${where} options`, KNOWN);
    if (options.backoff !== undefined && typeof options.backoff !== 'function') {
      throw new InvalidOptionError(`Option "backoff" must be a function (attempt) => Duration.`);
    }
    return {
      queue: options.queue === undefined ? undefined : checkName(options.queue, 'queue'),
      priority:
        options.priority === undefined ? undefined : checkInteger(options.priority, 'priority', MIN_PRIORITY, MAX_PRIORITY),
      timeoutMs: optionalPositiveMs(options.timeout, 'timeout'),
      maxAttempts:
        options.maxAttempts === undefined
          ? undefined
          : checkInteger(options.maxAttempts, 'maxAttempts', 1, MAX_ATTEMPTS_LIMIT),
      backoff: options.backoff,
      retentionMs: optionalMs(options.retention, 'retention'),
      maxReclaims:
        options.maxReclaims === undefined ? undefined : checkInteger(options.maxReclaims, 'maxReclaims', 0, 1_000_000),
      flow: resolveFlowLimits(options),
      schedule: options.schedule,
    };
  } catch (err) {
    if (err instanceof InvalidOptionError) throw new InvalidOptionError(`${where}: ${err.message}`);
    throw err;
  }
}
