import { Body, Controller, Post } from '@nestjs/common';
import { UsersService } from './users.service.js';

@Controller('users')
export class UsersController {
  constructor(private readonly users: UsersService) {}

  @Post()
  signUp(@Body() body: { email: string }) {
    return this.users.signUp(body.email);
  }
}
