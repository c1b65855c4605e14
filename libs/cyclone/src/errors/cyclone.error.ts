/**
 * Base of every error Cyclone throws. `code` is stable across releases, so
 * callers can branch on it without matching message text.
 */
export class CycloneError extends Error {
  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}
