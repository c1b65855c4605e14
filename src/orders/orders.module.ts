import { Module } from '@nestjs/common';
import { OrderSteps } from './order.steps.js';
import { OrdersController } from './orders.controller.js';
import { OrdersService } from './orders.service.js';

@Module({ providers: [OrdersService, OrderSteps], controllers: [OrdersController] })
export class OrdersModule {}
