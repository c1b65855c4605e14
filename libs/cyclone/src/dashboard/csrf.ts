import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { CsrfRejectedError } from '../errors/csrf-rejected.error.js';
import { CSRF_COOKIE, CSRF_HEADER } from './dashboard.constants.js';

/*
 * Cross-site request forgery. A guard passed by the browser's own
 * credentials (a session cookie, Basic auth) lets through a request that
 * another site's page made the browser send; actions must prove they came
 * from the dashboard's page. Three checks, each enough against a form post:
 *
 * - the token: the page is served with a random token in an HttpOnly,
 *   SameSite=Strict cookie and in the page itself; an action sends it back in
 *   the x-cyclone-csrf header, and it must equal the cookie. Another site can
 *   neither read the token nor set the header (a custom header on a
 *   cross-origin request needs a CORS preflight that the dashboard never
 *   answers). The token is stateless, so any replica accepts it;
 * - Fetch Metadata: a browser says where a request comes from in
 *   Sec-Fetch-Site; only same-origin passes;
 * - without it, an Origin header must name the host the request was sent to.
 */

interface HttpRequestLike {
  headers: Record<string, string | string[] | undefined>;
  cookies?: Record<string, unknown>;
}

const TOKEN = /^[A-Za-z0-9_-]{43}$/;

export function newCsrfToken(): string {
  return randomBytes(32).toString('base64url');
}

export function isCsrfToken(value: unknown): value is string {
  return typeof value === 'string' && TOKEN.test(value);
}

/** The dashboard's CSRF cookie of a request, if it sent a well-formed one. */
export function csrfCookieOf(request: HttpRequestLike): string | null {
  const parsed = request.cookies?.[CSRF_COOKIE];
  if (isCsrfToken(parsed)) return parsed;
  const header = request.headers.cookie;
  for (const pair of (Array.isArray(header) ? header.join(';') : (header ?? '')).split(';')) {
    const at = pair.indexOf('=');
    if (at > 0 && pair.slice(0, at).trim() === CSRF_COOKIE) {
      const value = pair.slice(at + 1).trim();
      if (isCsrfToken(value)) return value;
    }
  }
  return null;
}

/** Lets an action through only when it proves it came from the dashboard's own page. */
@Injectable()
export class DashboardCsrfGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<HttpRequestLike>();
    const header = (name: string) => {
      const value = request.headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const site = header('sec-fetch-site');
    if (site !== undefined && site !== 'same-origin') {
      throw new CsrfRejectedError(`the browser says it was sent from another site (Sec-Fetch-Site: ${site.slice(0, 40)})`);
    }
    const origin = header('origin');
    if (site === undefined && origin !== undefined && !sameHost(origin, header('host'))) {
      throw new CsrfRejectedError('its Origin header names another site than this one');
    }
    const sent = header(CSRF_HEADER);
    if (sent === undefined || sent === '') throw new CsrfRejectedError(`it carries no CSRF token (header ${CSRF_HEADER})`);
    const expected = csrfCookieOf(request);
    if (expected === null) throw new CsrfRejectedError(`the browser sent no ${CSRF_COOKIE} cookie`);
    if (!isCsrfToken(sent) || !timingSafeEqual(Buffer.from(sent), Buffer.from(expected))) {
      throw new CsrfRejectedError("its CSRF token does not match the dashboard's cookie");
    }
    return true;
  }
}

function sameHost(origin: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    const url = new URL(origin);
    const port = url.port || (url.protocol === 'https:' ? '443' : url.protocol === 'http:' ? '80' : '');
    const authority = host.toLowerCase();
    return url.host === authority || `${url.hostname}:${port}` === authority;
  } catch {
    return false;
  }
}
