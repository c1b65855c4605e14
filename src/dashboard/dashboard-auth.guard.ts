import { Injectable, UnauthorizedException, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { timingSafeEqual } from 'node:crypto';

/**
 * The example app's guard for the dashboard: HTTP Basic with one user from
 * DASHBOARD_USER and DASHBOARD_PASSWORD (admin / cyclone when unset). A real
 * app puts its own auth guard here (sessions, SSO, roles).
 */
@Injectable()
export class DashboardAuthGuard implements CanActivate {
  private readonly expected = Buffer.from(
    `Basic ${Buffer.from(`${process.env.DASHBOARD_USER ?? 'admin'}:${process.env.DASHBOARD_PASSWORD ?? 'cyclone'}`).toString('base64')}`,
  );

  constructor(private readonly adapterHost: HttpAdapterHost) {}

  canActivate(context: ExecutionContext): boolean {
    const http = context.switchToHttp();
    const given = Buffer.from(String(http.getRequest<{ headers: Record<string, unknown> }>().headers.authorization ?? ''));
    if (given.length === this.expected.length && timingSafeEqual(given, this.expected)) return true;
    // Makes the browser ask for the user name and password.
    this.adapterHost.httpAdapter.setHeader(http.getResponse(), 'WWW-Authenticate', 'Basic realm="Cyclone dashboard", charset="UTF-8"');
    throw new UnauthorizedException('Sign in to the Cyclone dashboard.');
  }
}
