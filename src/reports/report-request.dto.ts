import { IsEmail, IsInt, Matches, Max, MaxLength, Min } from 'class-validator';

/** The body of POST /reports: whose report, sent where, for which month. */
export class ReportRequest {
  @IsInt()
  @Min(1)
  @Max(2_147_483_647)
  userId!: number;

  @MaxLength(254)
  @IsEmail()
  email!: string;

  /** e.g. '2026-11' */
  @Matches(/^\d{4}-(0[1-9]|1[0-2])$/, { message: 'period must be a month such as 2026-11' })
  period!: string;
}
