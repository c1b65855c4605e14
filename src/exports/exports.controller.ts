import { Body, Controller, Get, HttpCode, Param, Post } from '@nestjs/common';
import { CycloneClient } from 'cyclone-nestjs';
import { ExportOrders } from './export.steps.js';
import { ExportRequest } from './export-request.dto.js';

@Controller('exports')
export class ExportsController {
  constructor(private readonly cyclone: CycloneClient) {}

  /** Queues an export that takes `seconds` (30 by default). */
  @Post()
  @HttpCode(202)
  async start(@Body() body: ExportRequest): Promise<{ runId: string }> {
    return { runId: await this.cyclone.enqueue(ExportOrders, { seconds: body.seconds ?? 30 }) };
  }

  /** Its state, progress and lease (owner, expiry, last heartbeat). */
  @Get(':runId')
  async status(@Param('runId') runId: string) {
    const [run, steps] = await Promise.all([this.cyclone.getRun(runId), this.cyclone.listSteps(runId)]);
    return { run, steps };
  }

  @Post(':runId/cancel')
  async cancel(@Param('runId') runId: string): Promise<{ cancelled: boolean }> {
    return { cancelled: await this.cyclone.cancel(runId) };
  }
}
