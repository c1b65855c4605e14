import { Injectable } from '@nestjs/common';
import { PermanentError, Step, type StepContext } from 'cyclone-nestjs';
import { ChargeCustomer, ReleaseItem, ReserveItem, type ItemRequest } from './checkout.workflow.js';

/**
 * Stand-ins for an inventory and a payment service. An SKU that starts with
 * "sold-out" cannot be reserved, so a demo can see the order compensate.
 */
@Injectable()
export class CheckoutSteps {
  @Step(ReserveItem)
  async reserve(input: ItemRequest, ctx: StepContext) {
    if (input.sku.startsWith('sold-out')) throw new PermanentError(`${input.sku} is out of stock`);
    return { sku: input.sku, reservationId: `${input.orderRef}/${input.sku}/${ctx.fencingToken}` };
  }

  @Step(ReleaseItem)
  async release(input: ItemRequest, ctx: StepContext) {
    ctx.logger.log(`Released ${input.sku} of order ${input.orderRef}`);
    return { sku: input.sku };
  }

  @Step(ChargeCustomer)
  async charge(input: { orderRef: string; customerId: number; amount: number }) {
    // The order reference makes the charge idempotent at the payment service.
    return { chargeId: `ch_${input.orderRef}` };
  }
}
