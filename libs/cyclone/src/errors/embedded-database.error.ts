import { CycloneError } from './cyclone.error.js';

/** The embedded PostgreSQL (the development default) could not start. */
export class EmbeddedDatabaseError extends CycloneError {
  constructor(message: string, cause?: unknown) {
    super('embedded_database', message, { cause });
  }
}
