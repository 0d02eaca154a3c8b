import { createSecretKey, type KeyObject } from 'node:crypto';
import type { Kysely } from 'kysely';
import { ConfigError } from '../config.ts';
import type { Schema } from '../db/schema.ts';
import { loadSealedKey, resealKey, sealedNewKey, sealValue, type SealedKey } from '../sealed-keys.ts';
import type { Keyring } from '../sealed.ts';

/**
 * The HS256 key of access tokens: JWT_SECRET when set. Otherwise 32 random bytes made on the
 * first start and kept in the database, so that every process sharing it signs and verifies
 * with the same key, sealed under a key derived from ENCRYPTION_KEY: a copy of the database
 * alone (a backup, a dump) signs no token. A KeyObject rather than bytes: jose caches the
 * WebCrypto key it derives from a KeyObject, but imports raw bytes afresh on every call (a
 * tenth of an authenticated request's CPU).
 */

type Db = Kysely<Schema>;

/** Where the key is kept, sealed. */
const SEALED: SealedKey = { row: 'sealed_jwt_secret', purpose: 'herald jwt secret' };
/** Where the code before migration 0027 kept the key in clear. */
const CLEAR = 'jwt_secret';

export async function loadSigningKey(db: Db, keyring: Keyring, configured: string | undefined): Promise<KeyObject> {
  if (configured) return createSecretKey(Buffer.from(configured));
  const key = await loadSealedKey(db, keyring, SEALED);
  if (key === undefined) {
    throw new ConfigError(
      'ENCRYPTION_KEY',
      'the key of access tokens in the database was sealed under another ENCRYPTION_KEY: set that one ' +
        '(or give it in ENCRYPTION_KEY_PREVIOUS while replacing it); if it is lost, ' +
        'herald rotate-jwt-secret --key-lost makes a new key of access tokens, and every access token ends',
    );
  }
  return key;
}

/**
 * The key the code before migration 0027 left in clear, sealed under its new name and
 * deleted; true if there was one. A sealed key already there wins: the clear one was then
 * made by a process on the old code started after the upgrade, and nothing must sign with it.
 */
export async function sealJwtSecret(db: Db, keyring: Keyring): Promise<boolean> {
  const clear = await db.selectFrom('settings').select('value').where('key', '=', CLEAR).executeTakeFirst();
  if (!clear) return false;
  await db
    .insertInto('settings')
    .values({ key: SEALED.row, value: sealValue(keyring, SEALED, clear.value) })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  await db.deleteFrom('settings').where('key', '=', CLEAR).where('value', '=', clear.value).execute();
  return true;
}

/** The key sealed anew under the current ENCRYPTION_KEY if one it replaced sealed it. */
export const resealJwtSecret = (db: Db, keyring: Keyring): Promise<void> => resealKey(db, keyring, SEALED);

/**
 * `herald rotate-jwt-secret`: a new key in place of the database's, for when a copy of it may
 * have leaked. Every token signed with the old one stops verifying where the new one is loaded:
 * in each process at its start (server.ts).
 */
export async function rotateJwtSecret(db: Db, keyring: Keyring): Promise<void> {
  const value = sealedNewKey(keyring, SEALED);
  await db
    .insertInto('settings')
    .values({ key: SEALED.row, value })
    .onConflict((oc) => oc.column('key').doUpdateSet({ value }))
    .execute();
  await db.deleteFrom('settings').where('key', '=', CLEAR).execute();
}
