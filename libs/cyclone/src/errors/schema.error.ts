import { CycloneError } from './cyclone.error.js';

/** The database schema is missing or older than this version of Cyclone. */
export class SchemaError extends CycloneError {
  constructor(message: string, cause?: unknown) {
    super('schema', message, { cause });
  }
}
