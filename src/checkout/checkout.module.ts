import { Module } from '@nestjs/common';
import { CheckoutSteps } from './checkout.steps.js';
import { CheckoutController } from './checkout.controller.js';
import { CheckoutFlow } from './checkout.flow.js';

@Module({ providers: [CheckoutSteps, CheckoutFlow], controllers: [CheckoutController] })
export class CheckoutModule {}
