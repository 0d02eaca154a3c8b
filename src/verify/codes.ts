import { createHmac, randomBytes, randomInt, timingSafeEqual, type KeyObject } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { prepareSealedKey, resealKey, sealedKeyReader, type SealedKey } from '../sealed-keys.ts';
import type { Keyring } from '../sealed.ts';

/**
 * Verify's codes: digits from the CSPRNG, uniformly distributed, kept only as an HMAC-SHA256
 * with a salt of their own, under a key Herald keeps sealed by ENCRYPTION_KEY
 * (sealed-keys.ts). The key is not derived from ENCRYPTION_KEY itself, so a pending code still
 * checks after ENCRYPTION_KEY is replaced; and a copy of the database alone cannot test the
 * million codes of 6 digits against a hash.
 */

const CODE_KEY: SealedKey = { row: 'sealed_verify_key', purpose: 'herald verify codes' };

/** A new code of `length` digits. */
export function newCode(length: number): string {
  return String(randomInt(0, 10 ** length)).padStart(length, '0');
}

/** The code's hash as a verification keeps it: a random salt of its own, then the HMAC of both. */
export function codeHash(key: KeyObject, code: string): string {
  const salt = randomBytes(12).toString('base64url');
  return `${salt}.${hmac(key, salt, code)}`;
}

/** Whether `code` is the one whose hash a verification keeps, compared in constant time. */
export function codeMatches(key: KeyObject, code: string, stored: string): boolean {
  const [salt, kept] = stored.split('.');
  if (kept === undefined) return false;
  const given = Buffer.from(hmac(key, salt, code));
  const expected = Buffer.from(kept);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const hmac = (key: KeyObject, salt: string, code: string) =>
  createHmac('sha256', key).update(`${salt}:${code}`).digest('base64url');

/** The key of code hashes: made by the first process that needs it, then read once per process. */
export const codeKey = sealedKeyReader(CODE_KEY, "Verify's codes");

/**
 * At every start (server/stored-secrets.ts), before anything starts a verification: the key made
 * if there is none yet. One sealed under an ENCRYPTION_KEY no longer given (the key lost, and
 * `herald rotate-jwt-secret` run) is replaced while no pending code depends on it; while one
 * does, the start stops, as it is more likely the wrong key given than a lost one. Without
 * this, with JWT_SECRET set nothing else opened a sealed value at start, and every
 * POST /verify answered 500 for good.
 */
export const prepareCodeKey = (db: Kysely<Schema>, keyring: Keyring, now: number): Promise<void> =>
  prepareSealedKey(
    db,
    keyring,
    CODE_KEY,
    () => codeKey(db, keyring),
    async () =>
      (await db
        .selectFrom('verifications')
        .select('id')
        .where('status', '=', 'pending')
        .where('expires_at', '>', now)
        .limit(1)
        .executeTakeFirst()) !== undefined,
  );

/** The key sealed anew under the current ENCRYPTION_KEY if one it replaced sealed it (server/stored-secrets.ts). */
export const resealCodeKey = (db: Kysely<Schema>, keyring: Keyring): Promise<void> => resealKey(db, keyring, CODE_KEY);
