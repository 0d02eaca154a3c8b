/**
 * The bytes of an untrusted base64url token, or null unless the text is their one canonical
 * encoding (RFC 4648 §5, unpadded as RFC 7515 §2 writes it). Node's decoder is lenient: it
 * skips characters outside the alphabet, a trailing partial character and the unused low
 * bits of the last one, so `<token>A` or `<token>` with its last character changed would
 * otherwise name the same bytes as `<token>` — a click recorded twice under two URLs.
 */
export function decodeBase64url(text: string): Buffer | null {
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : null;
}
