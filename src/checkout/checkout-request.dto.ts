import { ArrayMaxSize, ArrayMinSize, IsArray, IsInt, Length, Max, Min } from 'class-validator';
import { IsPlainText } from '../common/plain-text.validator.js';

/** The body of POST /checkouts: who orders, and what. */
export class CheckoutRequest {
  @IsInt()
  @Min(1)
  @Max(2_147_483_647)
  customerId!: number;

  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(50)
  @Length(1, 100, { each: true })
  @IsPlainText({ each: true })
  items!: string[];
}
