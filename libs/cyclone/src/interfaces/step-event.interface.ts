import type { ErrorKind } from '../sql/names.js';

/**
 * The step events `@OnStepEvent` listens to. An attempt that fails is
 * `failed`, then `retried` (another attempt follows) or `discarded` (none
 * does); a step discarded past `maxReclaims` is only `discarded`.
 */
export const STEP_EVENTS = ['completed', 'failed', 'retried', 'discarded', 'cancelled'] as const;
export type StepEventName = (typeof STEP_EVENTS)[number];

/** What an `@OnStepEvent` listener receives, once the outcome has committed. */
export interface StepEvent<Output = unknown> {
  event: StepEventName;
  runId: string;
  nodeId: string;
  kind: string;
  queue: string;
  /** The attempt the event is about, from 1. */
  attempt: number;
  /** `completed`: the output as stored (what `client.output()` returns). */
  output?: Output;
  /** `failed`, `retried`, `discarded`: the error stored with the step. */
  error?: string;
  errorKind?: ErrorKind;
}
