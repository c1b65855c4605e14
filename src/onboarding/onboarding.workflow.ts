import { defineStep, defineWorkflow } from 'cyclone-nestjs';

export interface OnboardingInput {
  userId: number;
  email: string;
}

export interface Profile {
  userId: number;
  name: string;
  company: string;
}

export interface Score {
  score: number;
  tier: 'standard' | 'priority';
}

export interface Approval {
  approvedBy: string;
}

export const FetchProfile = defineStep<OnboardingInput, Profile>('fetch_profile', { maxAttempts: 5 });
export const ScoreProfile = defineStep<OnboardingInput, Score>('score_profile');
export const SendWelcome = defineStep<OnboardingInput, { sentTo: string }>('send_welcome', { maxAttempts: 3 });

/**
 * A new user's onboarding: fetch and score their profile, wait (up to two
 * days) for someone to approve them, let a cooldown pass, then welcome them.
 * The cooldown comes from ONBOARDING_COOLDOWN so a demo need not wait ten
 * minutes.
 */
export const Onboarding = defineWorkflow<OnboardingInput>('onboarding')
  .step('fetch', FetchProfile)
  .step('score', ScoreProfile, { after: ['fetch'] })
  .waitForSignal('approval', { after: ['score'], timeout: '2d' })
  .sleep('cooldown', process.env.ONBOARDING_COOLDOWN ?? '10m', { after: ['approval'] })
  .step('welcome', SendWelcome, { after: ['cooldown', 'score', 'approval'] });
