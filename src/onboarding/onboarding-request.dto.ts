import { IsEmail, IsInt, Length, Max, MaxLength, Min } from 'class-validator';
import { IsPlainText } from '../common/plain-text.validator.js';

/** The body of POST /onboarding. */
export class OnboardingRequest {
  @IsInt()
  @Min(1)
  @Max(2_147_483_647)
  userId!: number;

  @MaxLength(254)
  @IsEmail()
  email!: string;
}

/** The body of POST /onboarding/:runId/approval: who approved. */
export class ApprovalRequest {
  @Length(1, 200)
  @IsPlainText()
  approvedBy!: string;
}
