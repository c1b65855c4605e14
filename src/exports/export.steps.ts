import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { Step, defineStep, type StepContext } from 'cyclone-nestjs';

export interface ExportInput {
  seconds: number;
}

export interface ExportOutput {
  seconds: number;
  rows: number;
}

/** A step that takes a while, on a queue of its own so that it never holds up reports. */
export const ExportOrders = defineStep<ExportInput, ExportOutput>('export_orders', {
  queue: 'exports',
  timeout: '15m',
  maxAttempts: 3,
});

@Injectable()
export class ExportSteps {
  /**
   * Stands in for a long export: a second of work at a time, its progress
   * reported after each, and it stops within the second when its signal
   * aborts (a cancel, its timeout, a lost lease, or the app shutting down:
   * then the step is handed back and runs again elsewhere). While it runs,
   * GET /exports/:runId and the dashboard show its lease being renewed.
   */
  @Step(ExportOrders)
  async export(input: ExportInput, ctx: StepContext): Promise<ExportOutput> {
    let rows = 0;
    for (let second = 1; second <= input.seconds; second++) {
      await sleep(1_000, undefined, { signal: ctx.signal });
      rows += 250;
      ctx.progress({ percent: Math.round((second * 100) / input.seconds), second, seconds: input.seconds, rows });
    }
    return { seconds: input.seconds, rows };
  }
}
