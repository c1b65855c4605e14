/** `instanceof` for what user code threw or returned, which may be a proxy whose traps throw. */
export function isInstance<T>(value: unknown, type: abstract new (...args: any[]) => T): value is T {
  try {
    return value instanceof type;
  } catch {
    return false;
  }
}
