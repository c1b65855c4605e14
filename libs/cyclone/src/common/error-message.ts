import { describeValue } from '../cyclone.messages.js';
import { storableText } from './storable-text.js';

/**
 * A readable message for anything a handler may throw, Error or not, that
 * can always be logged and stored: reading it never throws (a `message`
 * getter that throws, a `toJSON` that throws, a value without a prototype),
 * and the text holds nothing PostgreSQL refuses.
 */
export function errorMessage(error: unknown): string {
  return storableText(readMessage(error));
}

function readMessage(error: unknown): string {
  let isError: boolean;
  try {
    isError = error instanceof Error;
  } catch {
    isError = false;
  }
  if (isError) {
    try {
      const { message } = error as Error;
      if (typeof message === 'string' && message !== '') return message;
      const { name } = error as Error;
      return typeof name === 'string' && name !== '' ? name : 'Error';
    } catch {
      return 'An Error was thrown whose message cannot be read (its message getter throws)';
    }
  }
  if (typeof error === 'string') return `Non-Error thrown: ${error}`;
  try {
    const json = JSON.stringify(error);
    if (typeof json === 'string') return `Non-Error thrown: ${json}`;
  } catch {
    // A toJSON or getter that throws, a bigint, a cycle: describe it instead.
  }
  return `Non-Error thrown: ${describeValue(error)}`;
}
