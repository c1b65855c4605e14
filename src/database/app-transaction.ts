import { DatabaseUnavailableError } from 'cyclone-nestjs';
import type { DataSource, EntityManager } from 'typeorm';

/**
 * Runs the app's own transaction. When the database cannot be reached (a
 * refused or lost connection), the route answers as Cyclone's calls do:
 * DatabaseUnavailableError, which CycloneErrorFilter turns into a 503 that
 * names no server (the log has the details). Any other error is the route's.
 */
export async function appTransaction<T>(dataSource: DataSource, work: (manager: EntityManager) => Promise<T>): Promise<T> {
  try {
    return await dataSource.transaction(work);
  } catch (err) {
    if (!isConnectionFailure(err)) throw err;
    throw new DatabaseUnavailableError(
      `The app's transaction could not reach the database: ${(err as Error).message || 'the connection failed'}`,
      (err as { code?: string }).code,
      err,
    );
  }
}

/** A network error (ECONNREFUSED, ECONNRESET…), a session the server ended (57P0x), a connection exception (08xxx), or pg's words for them. */
function isConnectionFailure(err: unknown): boolean {
  const inner = (err as { driverError?: unknown }).driverError ?? err;
  const { code, message } = (inner ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (/^E[A-Z]+$/.test(code) || /^(08|57P0)/.test(code))) return true;
  return typeof message === 'string' && /^Connection terminated|is not queryable|timeout exceeded when trying to connect/.test(message);
}
