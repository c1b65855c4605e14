import { Injectable } from '@nestjs/common';
import { trace } from '@opentelemetry/api';
import { Step, type StepContext } from 'cyclone-nestjs';

export const TRACED_KIND = 'traced';

/** The traced tests' step: it starts a span of its own, which should nest under its attempt's span. */
@Injectable()
export class TracedSteps {
  @Step(TRACED_KIND, { maxAttempts: 2, backoff: () => 10 })
  async run(input: { failFirst?: boolean }, ctx: StepContext): Promise<{ pid: number; attempt: number }> {
    const span = trace.getTracer('traced-steps').startSpan('inner work');
    await new Promise((resolve) => setTimeout(resolve, 5));
    span.end();
    if (input?.failFirst && ctx.attempt === 1) throw new Error('the first attempt fails');
    return { pid: process.pid, attempt: ctx.attempt };
  }
}
