import { Body, Controller, Get, HttpCode, Param, Post } from '@nestjs/common';
import { CycloneClient } from 'cyclone-nestjs';
import { BuildReport } from './report.steps.js';
import { ReportRequest } from './report-request.dto.js';

@Controller('reports')
export class ReportsController {
  constructor(private readonly cyclone: CycloneClient) {}

  /** Queues a report; one per user and period while it is being built. */
  @Post()
  @HttpCode(202)
  async request(@Body() body: ReportRequest): Promise<{ runId: string }> {
    const input = { userId: body.userId, email: body.email, period: body.period };
    const runId = await this.cyclone.enqueue(BuildReport, input, { unique: `report:${input.userId}:${input.period}` });
    return { runId };
  }

  @Get(':runId')
  async status(@Param('runId') runId: string) {
    const [run, steps] = await Promise.all([this.cyclone.getRun(runId), this.cyclone.listSteps(runId)]);
    return { run, steps };
  }

  /** Waits up to 10 s for the report. */
  @Get(':runId/result')
  async result(@Param('runId') runId: string) {
    return this.cyclone.result<typeof BuildReport>(runId, { timeout: '10s' });
  }

  @Post(':runId/cancel')
  async cancel(@Param('runId') runId: string): Promise<{ cancelled: boolean }> {
    return { cancelled: await this.cyclone.cancel(runId) };
  }
}
