import { Injectable, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { type Observable, tap } from 'rxjs';

/**
 * Says in a `Server-Timing` header how long the server took to answer an API
 * call (after the guards, before the body is written), so the time a page
 * waits on the database shows in the browser's network panel, and the
 * benchmark can read it apart from the network.
 */
@Injectable()
export class ServerTimingInterceptor implements NestInterceptor {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const started = performance.now();
    const response = context.switchToHttp().getResponse();
    return next.handle().pipe(
      tap(() => {
        const ms = (performance.now() - started).toFixed(1);
        this.adapterHost.httpAdapter.setHeader(response, 'Server-Timing', `cyclone;dur=${ms};desc="dashboard"`);
      }),
    );
  }
}
