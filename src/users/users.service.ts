import { ConflictException, Injectable } from '@nestjs/common';
import { CycloneClient, CycloneDatabase } from 'cyclone-nestjs';
import { appTransaction } from '../database/app-transaction.js';
import { SendEmail } from '../emails/email.steps.js';

export interface User {
  id: number;
  email: string;
}

@Injectable()
export class UsersService {
  constructor(
    private readonly cyclone: CycloneClient,
    private readonly database: CycloneDatabase,
  ) {}

  /**
   * Signs a user up and queues the welcome email in the same transaction: if
   * the insert fails (a taken email), no email goes out; if it commits, the
   * email is guaranteed to be queued.
   */
  async signUp(email: string): Promise<User & { welcomeRunId: string }> {
    return appTransaction(this.database.dataSource, async (manager) => {
      const [user] = (await manager.query(
        'INSERT INTO users (email) VALUES ($1) ON CONFLICT (email) DO NOTHING RETURNING id, email',
        [email],
      )) as User[];
      if (!user) throw new ConflictException(`${email} is already signed up`);
      const welcomeRunId = await this.cyclone.enqueueTx(manager, SendEmail, {
        to: email,
        subject: 'Welcome',
        body: `Hello, user ${user.id}`,
      });
      return { ...user, welcomeRunId };
    });
  }
}
