import { applyDecorators, Get, Header, Inject, Injectable, NotFoundException, Param, Req, Res, UseFilters } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { DashboardAssets } from './dashboard-assets.js';
import { CSRF_COOKIE, DASHBOARD_OPTIONS } from './dashboard.constants.js';
import { DashboardExceptionFilter } from './dashboard-exception.filter.js';
import type { ResolvedDashboardOptions } from './dashboard-options.interface.js';
import { mountedBase, PAGE_SECURITY_POLICY, renderPage } from './dashboard-page.js';
import { csrfCookieOf, newCsrfToken } from './csrf.js';

interface PageRequest {
  headers: Record<string, string | string[] | undefined>;
  socket?: { encrypted?: boolean };
}

const PageHeaders = () =>
  applyDecorators(
    Header('Content-Type', 'text/html; charset=utf-8'),
    Header('Cache-Control', 'no-store'),
    Header('Content-Security-Policy', PAGE_SECURITY_POLICY),
    Header('X-Content-Type-Options', 'nosniff'),
    Header('X-Frame-Options', 'DENY'),
    Header('Referrer-Policy', 'same-origin'),
  );

/**
 * The pages (one document; the front end draws each page from the JSON API)
 * and the front end's files. Mounted at the dashboard's path, behind its
 * guard, by CycloneDashboardModule.
 */
@Injectable()
@UseFilters(DashboardExceptionFilter)
export class DashboardPagesController {
  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly assets: DashboardAssets,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  @Get()
  @PageHeaders()
  home(@Req() request: PageRequest, @Res({ passthrough: true }) response: unknown): string {
    return this.page(request, response, 0);
  }

  @Get('queues')
  @PageHeaders()
  queues(@Req() request: PageRequest, @Res({ passthrough: true }) response: unknown): string {
    return this.page(request, response, 1);
  }

  @Get('queues/:queue')
  @PageHeaders()
  queue(@Req() request: PageRequest, @Res({ passthrough: true }) response: unknown): string {
    return this.page(request, response, 2);
  }

  @Get('clients')
  @PageHeaders()
  clients(@Req() request: PageRequest, @Res({ passthrough: true }) response: unknown): string {
    return this.page(request, response, 1);
  }

  @Get('runs')
  @PageHeaders()
  runs(@Req() request: PageRequest, @Res({ passthrough: true }) response: unknown): string {
    return this.page(request, response, 1);
  }

  @Get('runs/:runId')
  @PageHeaders()
  run(@Req() request: PageRequest, @Res({ passthrough: true }) response: unknown): string {
    return this.page(request, response, 2);
  }

  @Get('schedules')
  @PageHeaders()
  schedules(@Req() request: PageRequest, @Res({ passthrough: true }) response: unknown): string {
    return this.page(request, response, 1);
  }

  @Get('assets/:file')
  @Header('Cache-Control', 'no-cache')
  @Header('X-Content-Type-Options', 'nosniff')
  asset(@Param('file') file: string, @Res({ passthrough: true }) response: unknown): string {
    const asset = this.assets.get(file);
    if (asset === undefined) throw new NotFoundException(`The dashboard has no asset named ${JSON.stringify(file.slice(0, 100))}.`);
    this.adapterHost.httpAdapter.setHeader(response, 'Content-Type', asset.contentType);
    return asset.body;
  }

  /**
   * The document, with a CSRF token: the one the browser already holds, so
   * that every tab of the dashboard keeps working, or a new one.
   */
  private page(request: PageRequest, response: unknown, pageSegments: number): string {
    const adapter = this.adapterHost.httpAdapter;
    const base = mountedBase(String(adapter.getRequestUrl(request)), pageSegments, this.options.path);
    let csrfToken: string | null = null;
    if (!this.options.readOnly) {
      csrfToken = csrfCookieOf(request) ?? newCsrfToken();
      adapter.setCookie(response, CSRF_COOKIE, csrfToken, {
        path: base,
        httpOnly: true,
        sameSite: 'strict',
        secure: isHttps(request),
      });
    }
    return renderPage({ base, csrfToken, readOnly: this.options.readOnly, version: this.assets.version });
  }
}

/** Whether the browser reached the app over TLS, directly or through a proxy that says so. */
function isHttps(request: PageRequest): boolean {
  const forwarded = request.headers['x-forwarded-proto'];
  const proto = (Array.isArray(forwarded) ? forwarded[0] : forwarded)?.split(',')[0].trim();
  return proto === 'https' || request.socket?.encrypted === true;
}
