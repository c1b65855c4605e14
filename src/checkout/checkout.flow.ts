import { Injectable } from '@nestjs/common';
import { Workflow, type WorkflowContext } from 'cyclone-nestjs';
import { randomUUID } from 'node:crypto';
import { ChargeCustomer, Checkout, ReleaseItem, ReserveItem, type CheckoutInput, type CheckoutOutcome } from './checkout.workflow.js';

/** What each SKU costs here: a stand-in for a catalogue lookup. */
const PRICE = 25;

@Injectable()
export class CheckoutFlow {
  /**
   * An order: reserve every item at once (a fan-out over the order's items,
   * each reservation a step of its own), and if one cannot be reserved,
   * release those that were (compensation) and cancel; else charge the
   * customer. The method runs again from the top after a crash or a wake-up:
   * the calls it already made return what they returned, so what is not
   * deterministic (a random reference, a price read now) is done in wf.run,
   * once, and recorded.
   */
  @Workflow(Checkout)
  async place(input: CheckoutInput, wf: WorkflowContext<CheckoutInput>): Promise<CheckoutOutcome> {
    const orderRef = await wf.run('order-ref', () => randomUUID().slice(0, 8));
    const total = await wf.run('price', () => input.items.length * PRICE);
    const reserved = await Promise.allSettled(
      input.items.map((sku, i) => wf.step(`reserve-${i}`, ReserveItem, { orderRef, sku })),
    );
    const unavailable = input.items.filter((_, i) => reserved[i].status === 'rejected');
    if (unavailable.length > 0) {
      // Compensation: what was reserved is released, each once; the names follow the reservations'.
      const held = input.items.flatMap((sku, i) => (reserved[i].status === 'fulfilled' ? [{ sku, i }] : []));
      await Promise.all(held.map(({ sku, i }) => wf.step(`release-${i}`, ReleaseItem, { orderRef, sku })));
      return { status: 'cancelled', orderRef, total, unavailable, released: held.map(({ sku }) => sku) };
    }
    const { chargeId } = await wf.step('charge', ChargeCustomer, { orderRef, customerId: input.customerId, amount: total });
    return { status: 'placed', orderRef, total, chargeId };
  }
}
