import { IsInt, IsOptional, Max, Min } from 'class-validator';

/** The body of POST /exports: how long the export takes, in seconds (30 when left out). */
export class ExportRequest {
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(600)
  seconds?: number;
}
