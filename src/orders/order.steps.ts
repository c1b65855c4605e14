import { Injectable } from '@nestjs/common';
import { CycloneClient, CycloneDatabase, Step, defineStep, type StepContext } from 'cyclone-nestjs';
import { SendEmail } from '../emails/email.steps.js';

export const ConfirmOrder = defineStep<{ orderId: number }, { emailRunId: string }>('confirm_order', { maxAttempts: 5 });

export interface OrdersSummary {
  /** The day summed up: the 24 hours before the tick. */
  from: string;
  to: string;
  orders: number;
  totalCents: number;
}

/** Every morning at 06:00 (the server's time zone), the previous day's orders are summed up. */
export const SummarizeOrders = defineStep<null, OrdersSummary>('summarize_orders', {
  schedule: { cron: '0 6 * * *', catchUp: 'latest' },
  maxAttempts: 3,
});

@Injectable()
export class OrderSteps {
  constructor(
    private readonly cyclone: CycloneClient,
    private readonly database: CycloneDatabase,
  ) {}

  /** Tells the customer their order arrived. */
  @Step(ConfirmOrder)
  async confirm(input: { orderId: number }): Promise<{ emailRunId: string }> {
    const [order] = (await this.database.dataSource.query(
      'SELECT o.id, o.total_cents, u.email FROM orders o JOIN users u ON u.id = o.user_id WHERE o.id = $1',
      [input.orderId],
    )) as { id: number; total_cents: number; email: string }[];
    const emailRunId = await this.cyclone.enqueueAction(SendEmail, {
      to: order.email,
      subject: `Order #${order.id}`,
      body: `We have your order of ${(order.total_cents / 100).toFixed(2)}.`,
    });
    return { emailRunId };
  }

  /** The durable schedule above: exactly one run a day across replicas and restarts. */
  @Step(SummarizeOrders)
  async summarize(_input: null, ctx: StepContext): Promise<OrdersSummary> {
    const [row] = (await this.database.dataSource.query(
      `SELECT now() - interval '1 day' AS "from", now() AS "to", count(*)::int AS orders,
              COALESCE(sum(total_cents), 0)::int AS "totalCents"
         FROM orders WHERE created_at > now() - interval '1 day'`,
    )) as { from: Date; to: Date; orders: number; totalCents: number }[];
    ctx.logger.log(`${row.orders} order(s) in the last day, ${(row.totalCents / 100).toFixed(2)} in all`);
    return { from: row.from.toISOString(), to: row.to.toISOString(), orders: row.orders, totalCents: row.totalCents };
  }
}
