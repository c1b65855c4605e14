import { Matches, type ValidationOptions } from 'class-validator';

/**
 * Text without control characters (NUL among them, which PostgreSQL cannot
 * store) and without half of a character (a lone UTF-16 surrogate, which it
 * would store as U+FFFD).
 */
export function IsPlainText(options?: ValidationOptions): PropertyDecorator {
  return Matches(/^(?:[^\p{Cc}\p{Cs}])*$/u, {
    message: '$property must be text without control characters or half characters',
    ...options,
  });
}
