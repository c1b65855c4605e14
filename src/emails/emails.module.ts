import { Module } from '@nestjs/common';
import { EmailSteps } from './email.steps.js';

@Module({ providers: [EmailSteps] })
export class EmailsModule {}
