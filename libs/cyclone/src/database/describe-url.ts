/** host:port/database of a PostgreSQL URL, without the user and password, for messages; never throws. */
export function describeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    const host = parsed.hostname || parsed.searchParams.get('host') || 'localhost';
    return `${host}:${parsed.port || '5432'}${parsed.pathname || '/'}`;
  } catch {
    return 'the configured URL (it is not a URL of the form postgres://user:password@host:5432/db)';
  }
}
