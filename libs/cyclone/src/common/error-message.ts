/** A readable message for anything a handler may throw, Error or not. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  try {
    return `Non-Error thrown: ${typeof error === 'string' ? error : JSON.stringify(error)}`;
  } catch {
    return `Non-Error thrown: ${String(error)}`;
  }
}
