import { Injectable } from '@nestjs/common';
import { PermanentError, Step, defineStep, type StepContext } from 'cyclone-nestjs';

export interface EmailInput {
  to: string;
  subject: string;
  body: string;
}

export const SendEmail = defineStep<EmailInput, void>('send_email', { maxAttempts: 5, timeout: '30s' });

@Injectable()
export class EmailSteps {
  /** Stands in for a mail provider call; an address it cannot deliver to is not worth retrying. */
  @Step(SendEmail)
  async send(input: EmailInput, ctx: StepContext): Promise<void> {
    if (!input.to.includes('@')) throw new PermanentError(`"${input.to}" is not an email address`);
    ctx.logger.log(`Sending "${input.subject}" to ${input.to} (attempt ${ctx.attempt})`);
  }
}
