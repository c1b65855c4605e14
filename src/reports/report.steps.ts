import { Injectable, Logger } from '@nestjs/common';
import { CycloneClient, OnStepEvent, Step, defineStep, type StepContext, type StepEvent } from 'cyclone-nestjs';
import { SendEmail } from '../emails/email.steps.js';

export interface ReportInput {
  userId: number;
  email: string;
  /** e.g. '2026-11' */
  period: string;
}

export interface ReportOutput {
  userId: number;
  period: string;
  orders: number;
  revenue: number;
}

export const BuildReport = defineStep<ReportInput, ReportOutput>('build_report', {
  queue: 'reports',
  timeout: '5m',
  maxAttempts: 3,
});

@Injectable()
export class ReportSteps {
  constructor(private readonly cyclone: CycloneClient) {}

  /**
   * Builds a monthly report, then queues the email that announces it. The
   * work checks its signal between chunks so a cancel or timeout stops it,
   * and reports how far it got (GET /reports/:runId shows it).
   */
  @Step(BuildReport)
  async build(input: ReportInput, ctx: StepContext): Promise<ReportOutput> {
    let orders = 0;
    let revenue = 0;
    for (let day = 1; day <= 30; day++) {
      ctx.signal.throwIfAborted();
      ctx.progress({ day, days: 30 });
      const seed = (input.userId * 31 + day) % 17;
      orders += seed % 3;
      revenue += seed * 12.5;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await this.cyclone.enqueueAction(SendEmail, {
      to: input.email,
      subject: `Your report for ${input.period}`,
      body: `${orders} orders, ${revenue.toFixed(2)} revenue`,
    });
    return { userId: input.userId, period: input.period, orders, revenue };
  }
}

/** Reacts to reports that will not be built: in a real app, an alert or a note to the user. */
@Injectable()
export class ReportAlerts {
  private readonly logger = new Logger('Reports');

  @OnStepEvent('discarded', BuildReport)
  discarded(event: StepEvent): void {
    this.logger.warn(`Report run ${event.runId} was given up after attempt ${event.attempt}: ${event.error}`);
  }
}
