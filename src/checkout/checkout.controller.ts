import { Body, Controller, Get, HttpCode, Param, Post } from '@nestjs/common';
import { CycloneClient } from 'cyclone-nestjs';
import { CheckoutRequest } from './checkout-request.dto.js';
import { Checkout } from './checkout.workflow.js';

@Controller('checkouts')
export class CheckoutController {
  constructor(private readonly cyclone: CycloneClient) {}

  @Post()
  @HttpCode(202)
  async place(@Body() body: CheckoutRequest): Promise<{ runId: string }> {
    return { runId: await this.cyclone.start(Checkout, { customerId: body.customerId, items: body.items }) };
  }

  /** The run and its nodes: the workflow's own, then each call it made. */
  @Get(':runId')
  async status(@Param('runId') runId: string) {
    const [run, steps] = await Promise.all([this.cyclone.getRun(runId), this.cyclone.listSteps(runId)]);
    return { run, steps };
  }

  /** Waits up to 10 s for the order's outcome. */
  @Get(':runId/result')
  async result(@Param('runId') runId: string) {
    return this.cyclone.result<typeof Checkout>(runId, { timeout: '10s' });
  }
}
