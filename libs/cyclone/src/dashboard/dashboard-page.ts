/**
 * The one HTML document the dashboard serves, for every page: the front end
 * renders the page from the JSON API. Nothing of a job is in it; what it
 * carries (the base path, the CSRF token) is escaped all the same.
 */

export interface PageSettings {
  /** Where the dashboard is mounted, as the browser sees it (global prefix included). */
  base: string;
  /** Null when the dashboard is read-only: there is nothing to post. */
  csrfToken: string | null;
  readOnly: boolean;
  /** The assets' version, to bust caches after an upgrade. */
  version: string;
}

/**
 * Scripts and styles only from the dashboard itself, no inline script, no
 * framing: should a value ever slip through unescaped, the browser still
 * runs nothing it brings.
 */
export const PAGE_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export function renderPage(settings: PageSettings): string {
  const base = escapeHtml(settings.base === '/' ? '' : settings.base);
  const v = escapeHtml(settings.version);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Cyclone</title>
<link rel="icon" href="${base}/assets/favicon.svg?v=${v}" type="image/svg+xml">
<link rel="stylesheet" href="${base}/assets/dashboard.css?v=${v}">
<script type="module" src="${base}/assets/main.js?v=${v}"></script>
</head>
<body data-base="${base}" data-csrf-token="${escapeHtml(settings.csrfToken ?? '')}" data-read-only="${settings.readOnly}">
<noscript>The Cyclone dashboard needs JavaScript.</noscript>
</body>
</html>
`;
}

/**
 * The base the browser sees: the request's path without the page's own
 * segments (`runs/:id` is two), so links work below a global prefix too.
 */
export function mountedBase(requestUrl: string, pageSegments: number, fallback: string): string {
  const path = requestUrl.split(/[?#]/, 1)[0].replace(/\/+$/, '');
  const segments = path.split('/').filter(Boolean);
  if (segments.length < pageSegments) return fallback;
  const base = `/${segments.slice(0, segments.length - pageSegments).join('/')}`;
  // Only plain path characters: anything else could make the base point elsewhere.
  return /^\/[A-Za-z0-9._~%/-]*$/.test(base) ? base : fallback;
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c]);
}
