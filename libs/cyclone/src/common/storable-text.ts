/** A lone UTF-16 surrogate: half of a character such as an emoji, cut by slicing a string. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');
/** A NUL or any surrogate, paired or not. */
const SUSPECT = /[\u0000\uD800-\uDFFF]/;

/**
 * What in `text` PostgreSQL cannot store as it is, or undefined: text and
 * jsonb refuse a NUL, and a lone surrogate is refused by jsonb and turned
 * into U+FFFD in text (so two different strings would be stored as one).
 */
export function unstorableText(text: string): string | undefined {
  // Nearly every string has neither: one quick scan decides.
  if (!SUSPECT.test(text)) return undefined;
  if (text.includes('\u0000')) return 'a NUL character (\\u0000), which PostgreSQL cannot store';
  if (LONE_SURROGATE.test(text)) {
    return 'half of a character (a lone UTF-16 surrogate, e.g. an emoji cut by slice), which PostgreSQL cannot store';
  }
  return undefined;
}

/** The longest error text stored for a failed attempt; a longer one is cut. */
export const MAX_ERROR_TEXT = 10_000;

/**
 * Text made storable for a message Cyclone records itself (a handler's
 * error): NUL shown as `\u0000`, lone surrogates as U+FFFD, cut at
 * MAX_ERROR_TEXT characters. For values a caller gives, refusing is right;
 * for an error that must be recorded whatever it says, this is.
 */
export function storableText(text: string): string {
  let clean = text.includes('\u0000') ? text.replaceAll('\u0000', '\\u0000') : text;
  if (LONE_SURROGATE.test(clean)) clean = clean.replace(LONE_SURROGATES, '\uFFFD');
  if (clean.length > MAX_ERROR_TEXT) {
    clean = `${clean.slice(0, MAX_ERROR_TEXT)}… (${clean.length - MAX_ERROR_TEXT} more characters)`;
    // The cut may have split a surrogate pair.
    clean = clean.replace(LONE_SURROGATES, '\uFFFD');
  }
  return clean;
}
