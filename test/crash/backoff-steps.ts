import { Injectable } from '@nestjs/common';
import { Step, defineWorkflow, type StepContext } from 'cyclone-nestjs';

/**
 * A step with a backoff of its own whose handler hangs past its timeout, so
 * the attempt ends only when a sweep consumes it; for the test that a
 * replica which does not run the kind applies the kind's backoff.
 */
export const HANG_KIND = 'hang_with_backoff';
/** The kind's backoff: far from the default's 1 s, so a sweep that falls back to the default shows. */
export const HANG_BACKOFF_MS = 600_000;
export const HANG_TIMEOUT_MS = 400;

export const HangFlow = defineWorkflow('hang_flow').step('hang', HANG_KIND);

@Injectable()
export class BackoffSteps {
  @Step(HANG_KIND, { timeout: HANG_TIMEOUT_MS, maxAttempts: 3, backoff: () => HANG_BACKOFF_MS })
  async hang(_input: unknown, ctx: StepContext): Promise<never> {
    process.send?.({ type: 'claimed', runId: ctx.runId, nodeId: ctx.nodeId });
    // Deaf to its signal: only the database clock ends this attempt.
    return new Promise<never>(() => undefined);
  }
}
