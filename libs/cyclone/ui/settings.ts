/** What the server put on the page: where the dashboard is mounted, the CSRF token, read-only or not. */
const data = document.body.dataset;

export const settings = {
  /** The mount path without a trailing slash ('' at the root). */
  base: data.base ?? '',
  csrfToken: data.csrfToken ?? '',
  readOnly: data.readOnly === 'true',
};

/** A link inside the dashboard. */
export function href(route: string, params?: URLSearchParams): string {
  const query = params && [...params.keys()].length > 0 ? `?${params}` : '';
  return `${settings.base}${route}${query}`;
}
