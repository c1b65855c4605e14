import { CycloneError } from './cyclone.error.js';

/**
 * Broker dispatch could not reach its Redis at startup (with
 * `whenRedisDown: 'wait'`; with `'claim'` the app starts and claims from
 * PostgreSQL until Redis answers). The message names the host, never a password.
 */
export class RedisUnavailableError extends CycloneError {
  constructor(message: string, cause?: unknown) {
    super('redis_unavailable', message, { cause });
  }
}
