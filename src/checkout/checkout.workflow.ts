import { defineStep, defineWorkflow } from 'cyclone-nestjs';

export interface CheckoutInput {
  customerId: number;
  /** The SKUs ordered; one reserved per item. */
  items: string[];
}

export interface CheckoutOutcome {
  status: 'placed' | 'cancelled';
  orderRef: string;
  total: number;
  /** Set when placed. */
  chargeId?: string;
  /** Set when cancelled: the items that could not be reserved, and those reserved that were released. */
  unavailable?: string[];
  released?: string[];
}

export interface ItemRequest {
  orderRef: string;
  sku: string;
}

export const ReserveItem = defineStep<ItemRequest, { sku: string; reservationId: string }>('reserve_item', { maxAttempts: 3 });
export const ReleaseItem = defineStep<ItemRequest, { sku: string }>('release_item');
export const ChargeCustomer = defineStep<{ orderRef: string; customerId: number; amount: number }, { chargeId: string }>(
  'charge_customer',
  { maxAttempts: 3 },
);

/** The typed reference of the checkout workflow (a @Workflow method, checkout.flow.ts). */
export const Checkout = defineWorkflow<CheckoutInput, CheckoutOutcome>('checkout');
