import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createSecretKey,
  hkdfSync,
  randomBytes,
  type KeyObject,
} from 'node:crypto';

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

/**
 * A value that does not open: sealed under another key, for another place, or altered. Its
 * message names the place's kind only (`send_recipients.tags`), never the rest, which may hold a
 * number or an address: a send's failure is logged and written to its other recipients' errors.
 */
export class SealedValueError extends Error {
  constructor(place: string) {
    const why = 'it was sealed under another ENCRYPTION_KEY, for another place, or altered';
    super(`a sealed value of ${place.split(':')[0]} does not open: ${why}`);
  }
}

/**
 * The one rule for ENCRYPTION_KEY's form, wherever it is read (the environment, the key file
 * beside a SQLite database): 32 bytes, written as 64 hex characters.
 */
export function keyFromHex(hex: string): KeyObject | undefined {
  return /^[0-9a-fA-F]{64}$/.test(hex) ? createSecretKey(Buffer.from(hex, 'hex')) : undefined;
}

export function generateKey(): KeyObject {
  return createSecretKey(randomBytes(32));
}

/**
 * ENCRYPTION_KEY and the keys it replaced (ENCRYPTION_KEY_PREVIOUS), newest first: values are
 * sealed under the current one and opened under any, so a key can be replaced without losing
 * what was sealed before it (docs/operations.md, "Replacing ENCRYPTION_KEY"). Keys for other uses (the
 * hash of Idempotency-Key requests, email's tracking tokens) are derived from each in turn.
 */
export class Keyring {
  readonly current: KeyObject;
  readonly all: readonly KeyObject[];
  private readonly derived = new Map<string, Keyring>();

  constructor(current: KeyObject, previous: readonly KeyObject[] = []) {
    this.current = current;
    this.all = [current, ...previous];
  }

  /**
   * The ring of keys derived for `purpose` (HKDF-SHA256, RFC 5869; no salt, the input being a
   * uniformly random key), once.
   */
  derive(purpose: string): Keyring {
    let ring = this.derived.get(purpose);
    if (!ring) {
      const [current, ...previous] = this.all.map((key) =>
        createSecretKey(Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), purpose, 32))),
      );
      ring = new Keyring(current, previous);
      this.derived.set(purpose, ring);
    }
    return ring;
  }
}

export function seal(key: KeyObject, clear: string, place: string): string {
  return sealWithIv(key, randomBytes(IV_BYTES), clear, place);
}

const syntheticIvKeys = new WeakMap<KeyObject, KeyObject>();

/**
 * `seal`, but one value at one place seals to the same text under one key: the IV is derived
 * from the value and its place (a synthetic IV, as RFC 5297's SIV makes one) under a key of its
 * own, not drawn at random. For a value compared as it rests: a webhook URL names a stream of
 * events, and one named twice is posted to once. It tells only which values are equal; two
 * different values never share an IV but for an HMAC-SHA256 collision in its first 96 bits.
 */
export function sealRepeatably(key: KeyObject, clear: string, place: string): string {
  let ivKey = syntheticIvKeys.get(key);
  if (!ivKey) {
    ivKey = createSecretKey(Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'synthetic IV', 32)));
    syntheticIvKeys.set(key, ivKey);
  }
  const iv = createHmac('sha256', ivKey).update(place).update('\0').update(clear).digest().subarray(0, IV_BYTES);
  return sealWithIv(key, iv, clear, place);
}

function sealWithIv(key: KeyObject, iv: Buffer, clear: string, place: string): string {
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(place));
  const ciphertext = Buffer.concat([cipher.update(clear, 'utf8'), cipher.final()]);
  return SEALED_PREFIX + Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString('base64url');
}

/** The clear value, opened under whichever key of the ring sealed it. */
export function open(keys: Keyring, sealed: string, place: string): string {
  const clear = tryOpen(keys, sealed, place);
  if (clear === undefined) throw new SealedValueError(place);
  return clear;
}

/** The clear value, or undefined where open would throw: for a caller with something better to say. */
export function tryOpen(keys: Keyring, sealed: string, place: string): string | undefined {
  return openUnder(keys.all, sealed, place);
}

/**
 * `sealed` sealed again under the ring's current key if an older key of the ring sealed it;
 * undefined if the current key did, or none did (such a value fails where it is used, with its
 * own error). For the secrets kept for good, at the start of a process that was given the keys
 * ENCRYPTION_KEY replaced: once they are sealed anew, dropping the old keys loses none of them.
 */
export function resealed(keys: Keyring, sealed: string, place: string): string | undefined {
  if (openUnder([keys.current], sealed, place) !== undefined) return undefined;
  const clear = openUnder(keys.all.slice(1), sealed, place);
  return clear === undefined ? undefined : seal(keys.current, clear, place);
}

function openUnder(keys: readonly KeyObject[], sealed: string, place: string): string | undefined {
  if (!sealed.startsWith(SEALED_PREFIX)) return undefined;
  const bytes = Buffer.from(sealed.slice(SEALED_PREFIX.length), 'base64url');
  if (bytes.length < IV_BYTES + TAG_BYTES) return undefined;
  for (const key of keys) {
    const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(place));
    decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      // Sealed under another key of the ring, or not at all: the next one.
    }
  }
  return undefined;
}
