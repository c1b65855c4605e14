import { Injectable } from '@nestjs/common';
import { Step, type StepContext } from 'cyclone-nestjs';
import {
  FetchProfile,
  ScoreProfile,
  SendWelcome,
  type Approval,
  type OnboardingInput,
  type Profile,
  type Score,
} from './onboarding.workflow.js';

@Injectable()
export class OnboardingSteps {
  /** Stands in for a CRM lookup. */
  @Step(FetchProfile)
  async fetch(input: OnboardingInput): Promise<Profile> {
    return { userId: input.userId, name: input.email.split('@')[0], company: input.email.split('@')[1] ?? 'unknown' };
  }

  @Step(ScoreProfile)
  async score(_input: OnboardingInput, ctx: StepContext): Promise<Score> {
    const profile = ctx.upstream<Profile>('fetch');
    const score = (profile.name.length * 7 + profile.company.length * 3) % 100;
    return { score, tier: score >= 50 ? 'priority' : 'standard' };
  }

  /** Every node gets the run's input; upstream outputs come through the context. */
  @Step(SendWelcome)
  async welcome(input: OnboardingInput, ctx: StepContext): Promise<{ sentTo: string }> {
    const { tier } = ctx.upstream<Score>('score');
    const { approvedBy } = ctx.upstream<Approval>('approval');
    ctx.logger.log(`Welcome to ${input.email} (${tier} tier, approved by ${approvedBy})`);
    return { sentTo: input.email };
  }
}
