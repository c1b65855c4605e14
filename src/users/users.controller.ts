import { Body, Controller, Post } from '@nestjs/common';
import { SignUpRequest } from './sign-up.dto.js';
import { UsersService } from './users.service.js';

@Controller('users')
export class UsersController {
  constructor(private readonly users: UsersService) {}

  @Post()
  signUp(@Body() body: SignUpRequest) {
    return this.users.signUp(body.email);
  }
}
