import { IsInt, Max, Min } from 'class-validator';

/** The body of POST /orders: whose order, and its total. */
export class OrderRequest {
  @IsInt()
  @Min(1)
  @Max(2_147_483_647)
  userId!: number;

  @IsInt()
  @Min(0)
  @Max(100_000_000)
  totalCents!: number;
}
