import { Injectable, UnauthorizedException, type CanActivate, type ExecutionContext, type Type } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { timingSafeEqual } from 'node:crypto';
import type { DashboardCredentials } from './dashboard-credentials.js';

/**
 * The example app's guard for the dashboard: HTTP Basic with one login (see
 * dashboardCredentials). A real app puts its own auth guard here (sessions,
 * SSO, roles). A class per login, since Nest makes the guard.
 */
export function dashboardAuthGuard({ user, password }: DashboardCredentials): Type<CanActivate> {
  const expected = Buffer.from(`Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`);

  @Injectable()
  class DashboardAuthGuard implements CanActivate {
    constructor(private readonly adapterHost: HttpAdapterHost) {}

    canActivate(context: ExecutionContext): boolean {
      const http = context.switchToHttp();
      const given = Buffer.from(String(http.getRequest<{ headers: Record<string, unknown> }>().headers.authorization ?? ''));
      if (given.length === expected.length && timingSafeEqual(given, expected)) return true;
      // Makes the browser ask for the user name and password.
      this.adapterHost.httpAdapter.setHeader(http.getResponse(), 'WWW-Authenticate', 'Basic realm="Cyclone dashboard", charset="UTF-8"');
      throw new UnauthorizedException('Sign in to the Cyclone dashboard.');
    }
  }
  return DashboardAuthGuard;
}
