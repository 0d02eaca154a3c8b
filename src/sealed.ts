import { createCipheriv, createDecipheriv, randomBytes, type KeyObject } from 'node:crypto';

/**
 * Sealed values: the bodies, tag values and rendered texts of an `isBodyEncrypted` send
 * (SPEC §2.1), and the responses an Idempotency-Key's record keeps, as they rest in the
 * database. AES-256-GCM under ENCRYPTION_KEY (or a key derived from it), a random
 * 12-byte IV each (NIST SP 800-38D §8.2.2: random IVs are safe up to 2^32 seals per key), and
 * the value's place (`sends.content:<send id>`, …) as additional data: a sealed value copied
 * to another send, recipient or record does not open there.
 *
 * Written `v1:<base64url of IV | tag | ciphertext>`, so another scheme can come beside it.
 */

/** What every sealed value starts with; JSON never does. */
export const SEALED_PREFIX = 'v1:';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A value that does not open: sealed under another key, for another place, or altered. */
export class SealedValueError extends Error {
  constructor(place: string) {
    super(`a sealed value of ${place} does not open: it was sealed under another ENCRYPTION_KEY, for another place, or altered`);
  }
}


export function seal(key: KeyObject, clear: string, place: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(place));
  const ciphertext = Buffer.concat([cipher.update(clear, 'utf8'), cipher.final()]);
  return SEALED_PREFIX + Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString('base64url');
}

export function open(key: KeyObject, sealed: string, place: string): string {
  if (!sealed.startsWith(SEALED_PREFIX)) throw new SealedValueError(place);
  const bytes = Buffer.from(sealed.slice(SEALED_PREFIX.length), 'base64url');
  if (bytes.length < IV_BYTES + TAG_BYTES) throw new SealedValueError(place);
  const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
  decipher.setAAD(Buffer.from(place));
  decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    throw new SealedValueError(place);
  }
}
