import { Module } from '@nestjs/common';
import { OnboardingController } from './onboarding.controller.js';
import { OnboardingSteps } from './onboarding.steps.js';

@Module({ providers: [OnboardingSteps], controllers: [OnboardingController] })
export class OnboardingModule {}
