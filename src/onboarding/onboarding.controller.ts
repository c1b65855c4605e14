import { Body, Controller, Get, HttpCode, Param, Post } from '@nestjs/common';
import { CycloneClient } from 'cyclone-nestjs';
import { ApprovalRequest, OnboardingRequest } from './onboarding-request.dto.js';
import { Onboarding } from './onboarding.workflow.js';

@Controller('onboarding')
export class OnboardingController {
  constructor(private readonly cyclone: CycloneClient) {}

  /** Starts onboarding; one run per user while it is in progress. */
  @Post()
  @HttpCode(202)
  async start(@Body() body: OnboardingRequest): Promise<{ runId: string }> {
    const input = { userId: body.userId, email: body.email };
    return { runId: await this.cyclone.start(Onboarding, input, { unique: `onboarding:${input.userId}` }) };
  }

  @Get(':runId')
  async status(@Param('runId') runId: string) {
    const [run, steps] = await Promise.all([this.cyclone.getRun(runId), this.cyclone.listSteps(runId)]);
    return { run, steps };
  }

  /** The approval signal; it may arrive before the run reaches the wait, and is kept until it does. */
  @Post(':runId/approval')
  @HttpCode(202)
  async approve(@Param('runId') runId: string, @Body() body: ApprovalRequest): Promise<{ delivered: boolean }> {
    return { delivered: await this.cyclone.signal(runId, 'approval', { approvedBy: body.approvedBy }) };
  }

  @Post(':runId/pause')
  async pause(@Param('runId') runId: string): Promise<{ paused: boolean }> {
    return { paused: await this.cyclone.pause(runId) };
  }

  @Post(':runId/resume')
  async resume(@Param('runId') runId: string): Promise<{ resumed: boolean }> {
    return { resumed: await this.cyclone.resume(runId) };
  }

  @Post(':runId/cancel')
  async cancel(@Param('runId') runId: string): Promise<{ cancelled: boolean }> {
    return { cancelled: await this.cyclone.cancel(runId) };
  }
}
