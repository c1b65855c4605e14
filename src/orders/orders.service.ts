import { Injectable, NotFoundException } from '@nestjs/common';
import { CycloneClient, CycloneDatabase } from 'cyclone-nestjs';
import { appTransaction } from '../database/app-transaction.js';
import { ConfirmOrder } from './order.steps.js';

export interface Order {
  id: number;
  userId: number;
  totalCents: number;
}

@Injectable()
export class OrdersService {
  constructor(
    private readonly cyclone: CycloneClient,
    private readonly database: CycloneDatabase,
  ) {}

  /** Records the order and queues its confirmation in the same transaction: no confirmation of an order that did not commit. */
  async place(userId: number, totalCents: number): Promise<Order & { confirmRunId: string }> {
    return appTransaction(this.database.dataSource, async (manager) => {
      const [order] = (await manager.query(
        `INSERT INTO orders (user_id, total_cents) SELECT id, $2 FROM users WHERE id = $1
         RETURNING id, user_id AS "userId", total_cents AS "totalCents"`,
        [userId, totalCents],
      )) as Order[];
      if (!order) throw new NotFoundException(`User ${userId} does not exist; sign them up first (POST /users).`);
      const confirmRunId = await this.cyclone.enqueueTx(manager, ConfirmOrder, { orderId: order.id });
      return { ...order, confirmRunId };
    });
  }
}
