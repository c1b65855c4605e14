import { Body, Controller, Post } from '@nestjs/common';
import { OrderRequest } from './order-request.dto.js';
import { OrdersService } from './orders.service.js';

@Controller('orders')
export class OrdersController {
  constructor(private readonly orders: OrdersService) {}

  @Post()
  place(@Body() body: OrderRequest) {
    return this.orders.place(body.userId, body.totalCents);
  }
}
