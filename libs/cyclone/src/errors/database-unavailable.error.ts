import { CycloneError } from './cyclone.error.js';

/**
 * The database could not serve the call: it could not be reached, refused
 * the connection (starting up, shutting down, too many connections), lost
 * the connection before anything could commit, or did not answer within
 * `statementTimeout`. Nothing was written; the call can be repeated.
 */
export class DatabaseUnavailableError extends CycloneError {
  constructor(
    message: string,
    /** The server's SQLSTATE, or the network error's code (ECONNREFUSED…), when there was one. */
    readonly reason: string | undefined,
    cause?: unknown,
  ) {
    super('database_unavailable', message, { cause });
  }
}
