import { isInstance } from './is-instance.js';
import { storableText } from './storable-text.js';

/** The stack of an Error that user code threw, made storable; null for anything else, or a stack that cannot be read. */
export function stackOf(thrown: unknown): string | null {
  if (!isInstance(thrown, Error)) return null;
  try {
    const { stack } = thrown;
    return typeof stack === 'string' && stack !== '' ? storableText(stack) : null;
  } catch {
    return null;
  }
}
