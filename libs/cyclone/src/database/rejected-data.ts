/**
 * Whether a statement failed on the data it was given: a data exception or an
 * integrity violation (SQLSTATE classes 22 and 23). Such a statement wrote
 * nothing and will fail the same way again, so a batch that hit one can be
 * split and each item tried alone, to find whose it was. Any other failure (a
 * lost connection) leaves the outcome unknown, and must not be retried.
 */
export function isRejectedData(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('22') || code.startsWith('23'));
}
