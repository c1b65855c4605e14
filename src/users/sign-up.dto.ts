import { IsEmail, MaxLength } from 'class-validator';

/** The body of POST /users. */
export class SignUpRequest {
  @MaxLength(254)
  @IsEmail()
  email!: string;
}
