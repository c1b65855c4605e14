import { Injectable, Module, UnauthorizedException, type CanActivate, type ExecutionContext, type LoggerService, type Provider } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { INestApplication } from '@nestjs/common';
import { CycloneClient, CycloneModule, type CycloneModuleOptions } from 'cyclone-nestjs';
import { CycloneDashboardModule, type CycloneDashboardOptions } from 'cyclone-nestjs/dashboard';
import { TestDatabase } from 'cyclone-nestjs/testing';
import { testServerUrl } from './nest-app-harness.js';

/** The credentials the test guard accepts (HTTP Basic), and the header that carries them. */
export const DASHBOARD_USER = { username: 'ops', password: 'let-me-in' };
export const AUTHORIZATION = `Basic ${Buffer.from(`${DASHBOARD_USER.username}:${DASHBOARD_USER.password}`).toString('base64')}`;

/** A guard like an app's own: HTTP Basic against one user; the browser asks for it on a 401. */
@Injectable()
export class TestBasicAuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>();
    if (request.headers.authorization === AUTHORIZATION) return true;
    context.switchToHttp().getResponse<{ setHeader(name: string, value: string): void }>().setHeader('WWW-Authenticate', 'Basic realm="Cyclone"');
    throw new UnauthorizedException('The dashboard needs a user name and password.');
  }
}

export interface DashboardAppOptions {
  providers?: Provider[];
  cyclone?: Omit<CycloneModuleOptions, 'connection'>;
  dashboard?: CycloneDashboardOptions;
  /** A database to share with another app; a new one (dropped on close) by default. */
  databaseUrl?: string;
  globalPrefix?: string;
  logger?: LoggerService;
}

/** A Nest HTTP app (Express, as the example app) serving Cyclone and its dashboard on a free port. */
export class DashboardApp {
  private constructor(
    readonly app: INestApplication,
    /** http://127.0.0.1:port */
    readonly origin: string,
    readonly databaseUrl: string,
    private readonly database: TestDatabase | undefined,
  ) {}

  static async start(options: DashboardAppOptions = {}): Promise<DashboardApp> {
    const database = options.databaseUrl ? undefined : await TestDatabase.create(testServerUrl());
    const url = options.databaseUrl ?? database!.url;
    @Module({
      imports: [
        CycloneModule.forRoot({ pollInterval: [20, 100], shutdownTimeout: 1_000, ...options.cyclone, connection: { url } }),
        CycloneDashboardModule.forRoot(options.dashboard ?? { guard: TestBasicAuthGuard }),
      ],
      providers: options.providers ?? [],
    })
    class DashboardTestModule {}
    try {
      const app = await NestFactory.create(DashboardTestModule, { logger: options.logger ?? ['error'], abortOnError: false });
      if (options.globalPrefix) app.setGlobalPrefix(options.globalPrefix);
      await app.listen(0, '127.0.0.1');
      const origin = (await app.getUrl()).replace('[::1]', '127.0.0.1');
      return new DashboardApp(app, origin, url, database);
    } catch (err) {
      await database?.drop();
      throw err;
    }
  }

  get client(): CycloneClient {
    return this.app.get(CycloneClient);
  }

  /** A request to the app with the guard's credentials (unless `auth: false`). */
  request(path: string, init: RequestInit & { auth?: boolean } = {}): Promise<Response> {
    const { auth = true, headers, ...rest } = init;
    return fetch(`${this.origin}${path}`, {
      ...rest,
      headers: { ...(auth ? { authorization: AUTHORIZATION } : {}), ...(headers as Record<string, string> | undefined) },
      redirect: 'manual',
    });
  }

  async json<T = any>(path: string): Promise<{ status: number; body: T }> {
    const response = await this.request(path);
    return { status: response.status, body: (await response.json()) as T };
  }

  /**
   * What the dashboard's own page would send with an action: the CSRF cookie
   * it set on the page and the token the page holds.
   */
  async csrf(pagePath = '/cyclone'): Promise<{ cookie: string; token: string }> {
    const page = await this.request(pagePath);
    const html = await page.text();
    const token = /data-csrf-token="([^"]*)"/.exec(html)?.[1];
    const cookie = page.headers.getSetCookie().find((c) => c.startsWith('cyclone_csrf='));
    if (!token || !cookie) throw new Error(`The page at ${pagePath} set no CSRF token (status ${page.status})`);
    return { cookie: cookie.split(';')[0], token };
  }

  /** POSTs an action as the dashboard's page does. */
  async act(path: string, csrf?: { cookie: string; token: string }): Promise<{ status: number; body: any }> {
    const { cookie, token } = csrf ?? (await this.csrf());
    const response = await this.request(path, { method: 'POST', headers: { cookie, 'x-cyclone-csrf': token } });
    return { status: response.status, body: await response.json() };
  }

  async close(): Promise<void> {
    await this.app.close();
    await this.database?.drop();
  }
}
